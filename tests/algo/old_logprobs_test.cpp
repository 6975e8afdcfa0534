// π_old from the update's own forward (OldLogprobs::kUpdateForward, policy_plan.h)
// against the separate pass before the update (kPass), on one GRPO batch that
// takes one optimizer step: the policy at the update's start is π_old, so both
// give the same loss, clip fraction, KL, gradient norm, updated weights, and the
// same mismatch and importance-weight figures, within fp32 rounding. Roles are
// built by the runner from YAML (reward_model_setup.h); the engine's log-probs
// are literal, so the mismatch and the weights are far from zero.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <map>
#include <string>
#include <vector>

#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/stages/actor_update.h"
#include "hpcrl/algo/stages/experience_builder.h"
#include "hpcrl/algo/stages/policy_stage.h"
#include "reward_model_setup.h"

namespace hpcrl::testing {
namespace {

using algo::OldLogprobs;

struct OneUpdate {
  std::map<std::string, double> metrics;  // the update's figures and m.extra by name
  std::vector<at::Tensor> weights;        // the policy's parameters after the step
  bool ran_pass = false;                  // seconds/old_logprob was recorded
};

// Six samples of `random_samples`, each response token sampled (so the engine says) at log-prob -2.
algo::RolloutSamples six_samples() {
  const Samples s = random_samples(6, /*seed=*/11, /*vocab=*/256);
  algo::RolloutSamples out;
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    out.prompt_ids.push_back(s.prompts[i]);
    out.response_ids.push_back(s.responses[i]);
    out.logprobs.emplace_back(s.responses[i].size(), -2.0f);
    out.example.push_back(i);
    out.scores.push_back(double(i % 3));  // 0, 1, 2, 0, 1, 2
    out.truncated.push_back(false);
  }
  return out;
}

// One iteration's experience and update of a fresh tiny policy (seeded: the same weights each call).
OneUpdate update_with(OldLogprobs source, double tis_cap) {
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}"));
  config::GrpoStage cfg = *p->cfg.stages.front().as<config::GrpoStage>();
  cfg.prompts = 3;
  cfg.group = 2;  // 6 responses, one mini-batch, one epoch
  cfg.recompute_old_logprobs = true;
  cfg.tis_cap = tis_cap;  // > 0: the decoupled objective, behaviour = the engine's log-probs
  cfg.train.lr = 1e-3;
  algo::Role& policy = p->policy();
  algo::PolicyPlan plan = algo::plan_policy_stage(cfg, policy, policy, nullptr, false, false);
  EXPECT_EQ(plan.old_logprobs, OldLogprobs::kUpdateForward);  // what the stage would choose
  plan.old_logprobs = source;
  const algo::DataSplits data;
  const algo::PolicyStageContext stage{p->env, cfg, policy, policy, nullptr, data, "grpo", plan};
  algo::ExperienceBuilder builder(stage);
  algo::ActorUpdate actor(stage);
  algo::Trainer trainer(policy, cfg.train, /*total_steps=*/1);
  algo::RolloutSamples kept = six_samples();
  algo::RlMetrics m;
  algo::Experience exp = builder.make(kept, /*iteration=*/0, /*staleness=*/0, m);
  // Group-relative advantages of the scores 0,1 | 2,0 | 1,2 by hand: -0.5, 0.5, 1, -1, -0.5, 0.5 (no std).
  const at::Tensor adv = at::tensor({-0.5f, 0.5f, 1.0f, -1.0f, -0.5f, 0.5f}).unsqueeze(1);
  exp.advantages = adv * exp.batch.loss_mask;
  actor.update(exp, trainer, algo::policy_loss_config(cfg), 0, m);
  OneUpdate out;
  out.metrics = {{"loss", m.loss}, {"kl", m.kl}, {"clip_frac", m.clip_frac}, {"grad_norm", m.grad_norm},
                 {"entropy", m.entropy}};
  for (const auto& [k, v] : m.extra) out.metrics[k] = v;
  for (const auto& [k, v] : m.seconds_by_span) out.ran_pass = out.ran_pass || k == "old_logprob";
  for (const auto& w : policy.model->parameters()) out.weights.push_back(w.detach().clone());
  return out;
}

void expect_same_update(const OneUpdate& pass, const OneUpdate& update) {
  ASSERT_EQ(pass.metrics.size(), update.metrics.size());
  for (const auto& [k, v] : pass.metrics) {
    ASSERT_TRUE(update.metrics.count(k)) << k;
    // fp32 forwards of the same weights and rows, one with autograd recording: rounding only.
    EXPECT_NEAR(update.metrics.at(k), v, 1e-5 * std::max(1.0, std::abs(v))) << k;
  }
  ASSERT_EQ(pass.weights.size(), update.weights.size());
  for (size_t i = 0; i < pass.weights.size(); ++i)
    EXPECT_LE((pass.weights[i] - update.weights[i]).abs().max().item<double>(), 1e-6) << "parameter " << i;
}

TEST(OldLogprobsFromUpdate, EqualTheSeparatePassOnOneOptimizerStep) {
  const OneUpdate pass = update_with(OldLogprobs::kPass, 0);
  const OneUpdate update = update_with(OldLogprobs::kUpdateForward, 0);
  EXPECT_TRUE(pass.ran_pass);
  EXPECT_FALSE(update.ran_pass);  // no forward of its own
  ASSERT_TRUE(pass.metrics.count("mismatch/logprob_abs_mean"));
  // The engine said -2 for every token; the tiny policy's log-probs are near -log(272) ≈ -5.6.
  EXPECT_GT(pass.metrics.at("mismatch/logprob_abs_mean"), 1.0);
  expect_same_update(pass, update);
}

TEST(OldLogprobsFromUpdate, EqualTheSeparatePassUnderTheDecoupledObjective) {
  // tis_cap 2: w = min(π_old/π_behaviour, 2) with π_behaviour = e^-2 per token, π_old ≈ e^-5.6.
  const OneUpdate pass = update_with(OldLogprobs::kPass, 2.0);
  const OneUpdate update = update_with(OldLogprobs::kUpdateForward, 2.0);
  ASSERT_TRUE(pass.metrics.count("offpolicy/iw_mean"));
  EXPECT_LT(pass.metrics.at("offpolicy/iw_mean"), 0.1);  // e^(-5.6 + 2) ≈ 0.03
  expect_same_update(pass, update);
}

}  // namespace
}  // namespace hpcrl::testing
