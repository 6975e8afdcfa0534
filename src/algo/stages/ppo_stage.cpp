// The PPO stage loop (see ppo_stage.h).
#include "hpcrl/algo/stages/ppo_stage.h"

#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/training/critic_update.h"
#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/stages/policy_run.h"
#include "hpcrl/algo/remote/remote_critic.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/value_pass.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
// GAE advantages and returns from the critic's values of the rollout and the
// sequence rewards (with the KL to the reference per token when in the reward).
GaeResult ppo_advantages(const config::PpoStage& cfg, bool has_reference, const at::Tensor& old_values,
                         Experience& exp) {
  const at::Tensor& mask = exp.batch.loss_mask;
  at::Tensor kl = has_reference && cfg.kl.in_reward ? kl_estimate(exp.old_logp, exp.ref_logp, cfg.kl.estimator)
                                                    : at::zeros(mask.sizes(), mask.options());
  trace::ScopedSpan span("ppo/advantage");
  at::Tensor rewards = kl_shaped_rewards(exp.scores, kl, mask, cfg.kl.in_reward ? cfg.kl.coef : 0.0);
  GaeResult g = gae(rewards, old_values, mask, cfg.gamma, cfg.lam, /*whiten=*/true);
  exp.advantages = g.advantages;
  return g;
}

// PPO's trainer: the critic's values, GAE advantages, the actor's update
// (after the critic's warm-up) and the critic's update, here or on its own ranks.
class PpoTraining : public PolicyTraining {
 public:
  PpoTraining(StageEnv& env, const config::PpoStage& cfg, PolicyStage& stage, Role& critic, Role* reference);

  void train(Experience& exp, RlMetrics& m, int64_t it) override;
  double lr(int64_t it) const override { return actor_->lr(it * cfg_.epochs * n_mini_); }
  void serve(int64_t it) override {
    if (remote_ && critic_.member()) remote_->serve(*critic_trainer_, it, n_mini_);
  }

 private:
  // The critic's values of the experience's tokens (masked), here or from its own ranks.
  at::Tensor old_values(const Experience& exp);
  // The critic's update towards the returns; adds its metrics.
  void update_critic(const Experience& exp, const at::Tensor& old_values, const GaeResult& g, int64_t it,
                     double tokens, RlMetrics& m);

  StageEnv& env_;
  const config::PpoStage& cfg_;
  PolicyStage& stage_;
  Role& critic_;
  const bool has_reference_;
  const PolicyLossConfig pl_;
  const int64_t n_mini_;
  std::optional<Trainer> actor_, critic_trainer_;
  std::unique_ptr<RemoteCritic> remote_;  // a critic on ranks of its own
};

PpoTraining::PpoTraining(StageEnv& env, const config::PpoStage& cfg, PolicyStage& stage, Role& critic,
                         Role* reference)
    : env_(env), cfg_(cfg), stage_(stage), critic_(critic), has_reference_(reference != nullptr),
      pl_(policy_loss_config(cfg)), n_mini_(stage.actor().minibatches_per_epoch()) {
  Role& policy = stage.policy();
  const int64_t steps = cfg.iterations * cfg.epochs * n_mini_;
  if (policy.member()) actor_.emplace(policy, cfg.train, steps);
  if (critic.member()) critic_trainer_.emplace(critic, cfg.train, steps, cfg.critic_lr);
  if (on_own_ranks(critic, policy))  // values and updates come from its ranks
    remote_ = std::make_unique<RemoteCritic>(critic, policy, env.world->size(), cfg, "ppo");
  saved_ = {{&policy, actor_ ? &actor_->optimizer() : nullptr},
            {&critic, critic_trainer_ ? &critic_trainer_->optimizer() : nullptr}};
}

at::Tensor PpoTraining::old_values(const Experience& exp) {
  trace::ScopedSpan span("ppo/values");
  const at::Tensor& mask = exp.batch.loss_mask;
  if (remote_) return remote_->values(exp.batch) * mask;
  return forward_values(critic_, exp.batch, micro_batch_options(cfg_.train, critic_.ctx.sp_size())) * mask;
}

void PpoTraining::update_critic(const Experience& exp, const at::Tensor& old_values, const GaeResult& g, int64_t it,
                                double tokens, RlMetrics& m) {
  if (remote_) {
    for (const auto& kv : remote_->update(exp.batch, g.returns)) m.extra.push_back(kv);
    return;
  }
  const ValueTargets target{exp.batch.loss_mask, old_values, g.returns, cfg_.value_clip};
  const CriticSums sums =
      critic_update({cfg_, critic_, *critic_trainer_, n_mini_, env_.world->rank()}, exp.batch, target, it);
  for (const auto& kv : critic_loss_metrics(cfg_, critic_, sums, tokens, n_mini_)) m.extra.push_back(kv);
}

void PpoTraining::train(Experience& exp, RlMetrics& m, int64_t it) {
  const at::Tensor& mask = exp.batch.loss_mask;
  const at::Tensor values = old_values(exp);
  const GaeResult g = ppo_advantages(cfg_, has_reference_, values, exp);
  if (it >= cfg_.critic_warmup) stage_.actor().update(exp, *actor_, pl_, it, m);
  const double tokens = response_tokens(stage_.policy(), mask);
  update_critic(exp, values, g, it, tokens, m);
  m.extra.emplace_back("critic/values_mean", values_mean(stage_.policy(), values, mask, tokens));
  if (actor_ && actor_->skips_nonfinite())
    m.extra.emplace_back("nonfinite/skipped_steps", double(actor_->skipped_steps()));
}

}  // namespace

StageResult run_ppo(StageEnv& env) {
  const config::PpoStage& cfg = std::get<config::PpoStage>(env.stage->body);
  Role& policy = env.role(cfg.policy);
  Role& critic = env.role(cfg.critic);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "ppo", env.rollout_role(cfg.policy));
  check_critic(env, policy, critic);
  if (!on_own_ranks(critic, policy)) check_same_rows(env.world, policy, critic, env.stage->path);  // it scores the policy's rows
  if (reference && !on_own_ranks(*reference, policy)) check_same_rows(env.world, policy, *reference, env.stage->path);
  PpoTraining training(env, cfg, stage, critic, reference);
  return run_policy_stage(env, stage, training);
}

}  // namespace hpcrl::algo
