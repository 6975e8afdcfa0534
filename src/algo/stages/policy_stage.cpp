// The policy stage's set-up, collect, metrics, evaluation and checkpoints (policy_stage.h).
#include "hpcrl/algo/stages/policy_stage.h"

#include <spdlog/spdlog.h>

#include <numeric>

#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
Role& generator_of(Role& policy, Role* generator) { return generator ? *generator : policy; }

// Prompts are built where they are generated or evaluated: on the policy's and the generator's ranks
// (a reference or critic of its own only answers the trainer; validation gives every rank a role).
std::unique_ptr<PromptBuilder> make_prompts(const PolicyStageContext& stage, const tools::StageToolkit* tools) {
  const Role* here = stage.policy.member() ? &stage.policy : stage.generator.member() ? &stage.generator : nullptr;
  if (!here) return nullptr;
  return std::make_unique<PromptBuilder>(*here->tokenizer, stage.env.pipeline->find_data(stage.cfg.data),
                                         tools::tool_schemas(tools));
}

std::unique_ptr<io::DataSampler> make_sampler(const PolicyStageContext& stage) {
  const StageEnv& env = stage.env;
  return std::make_unique<io::DataSampler>(stage.data.train.size(),
                                           static_cast<uint64_t>(env.pipeline->run.seed) + 17u * env.stage_index,
                                           env.pipeline->find_data(stage.cfg.data)->shuffle,
                                           io::content_hash(stage.data.train));
}
}  // namespace

PolicyStage::PolicyStage(StageEnv& env, const config::RlStage& cfg, Role& policy, Role* reference,
                         const DataSplits& data, std::string stage_name, Role* generator)
    : rewards_(env, cfg.rewards, generator_of(policy, generator), cfg.train.micro_batch, stage_name),
      context_{env,
               cfg,
               policy,
               generator_of(policy, generator),
               reference,
               data,
               std::move(stage_name),
               plan_policy_stage(cfg, policy, generator_of(policy, generator), reference,
                                 reference && on_own_ranks(*reference, policy), rewards_.serves_apart())},
      eval_stops_(env, policy),
      tools_(tools::stage_toolkit(*env.pipeline, cfg.tools)),
      prompts_(make_prompts(context_, tools_.get())),
      sampler_(make_sampler(context_)),
      producer_(context_, rewards_, prompts_.get(), *sampler_, tools_.get()),
      experience_(context_),
      actor_(context_) {
  if (context_.plan.placement == GenerationPlacement::kResharded)
    redeal_ = std::make_unique<SampleChannel>(context_.generator, policy,
                                              dist::new_group(all_ranks(env.world->size()), name() + "/redeal"),
                                              cfg.group);
}

PolicyStage::~PolicyStage() = default;

void PolicyStage::serve_rewards() { rewards_.serve_iteration(); }

Experience PolicyStage::collect(int64_t iteration, RlMetrics& m) {
  RolloutRound round = producer_.produce(iteration, iteration);  // colocated: iteration i samples with i updates
  if (redeal_) round.kept = redeal_->redeal(round.kept);  // into the training layout's dp shares
  add_rollout_metrics(round, m);
  return experience_.make(round.kept, iteration, /*staleness=*/0, m);
}

int64_t PolicyStage::resume(const std::vector<TrainedRole>& saved, bool* eval_owed) {
  return resume_stage(context_.env, saved, *sampler_, context_.name, eval_owed);
}

void PolicyStage::checkpoint(int64_t iteration, const std::vector<TrainedRole>& saved, bool eval_owed) {
  checkpoint_stage(context_.env, iteration, saved, *sampler_, context_.name, eval_owed);
}

void PolicyStage::evaluate(int64_t step, StageResult& result) {
  if (context_.data.eval.size() == 0) return;
  EvalOptions options = eval_options(*context_.env.pipeline);
  options.stops = &eval_stops_;
  options.tools = tools_.get();
  auto r = algo::evaluate(context_.policy, context_.data.eval, *prompts_, rewards_.verifier(), options);
  result.eval_accuracy = r.accuracy;
  result.eval_loss = r.loss;
  spdlog::info("{} iteration {}: eval accuracy {:.3f}, loss {:.4f} ({} examples, {:.1f}s)", context_.name, step, r.accuracy,
               r.loss, r.examples, r.seconds);
  if (context_.env.metrics)
    context_.env.metrics->write(context_.name, context_.env.stage_index, step,
                        {{"eval/accuracy", r.accuracy}, {"eval/loss", r.loss},
                         {"eval/response_len", r.response_len}, {"seconds/eval", r.seconds}});
  if (context_.env.metrics) context_.env.metrics->write_samples(context_.name, context_.env.stage_index, step, r.samples);
}

void PolicyStage::write_metrics(int64_t step, const RlMetrics& m, double lr) {
  if (!context_.env.metrics) return;
  trace::Metrics out{{"loss", m.loss},
                     {"lr", lr},
                     {"grad_norm", m.grad_norm},
                     {"tokens_per_s", m.tokens / std::max(1e-9, m.seconds)},
                     {"reward/mean", m.reward_mean},
                     {"reward/std", m.reward_std},
                     {"accuracy", m.accuracy},
                     {"kl", m.kl},
                     {"entropy", m.entropy},
                     {"clip_frac", m.clip_frac},
                     {"response_len/mean", m.response_len_mean},
                     {"response_len/max", m.response_len_max},
                     {"seconds/iteration", m.seconds}};
  if (context_.cfg.dynamic_sampling) {
    out.emplace_back("dynamic_sampling/kept_groups", m.kept_groups);
    out.emplace_back("dynamic_sampling/rounds", m.sampling_rounds);
  }
  for (const auto& [k, v] : m.seconds_by_span) out.emplace_back("seconds/" + k, v);
  for (const auto& kv : m.extra) out.push_back(kv);
  context_.env.metrics->write(context_.name, context_.env.stage_index, step, out);
}

StageLoop PolicyStage::stage_loop(int64_t start, bool eval_owed) const {
  StageLoop loop;
  loop.name = context_.name;
  loop.unit = "iter";
  loop.start = start;
  loop.eval_owed = eval_owed;
  loop.total = context_.cfg.iterations;
  loop.eval_every = context_.cfg.eval_every;
  loop.stop_at_accuracy = context_.cfg.stop_at_accuracy;
  return loop;
}

PolicyLossConfig policy_loss_config(const config::RlStage& cfg) {
  PolicyLossConfig pl;
  pl.kind = cfg.policy_loss;
  pl.clip_low = cfg.clip_low;
  pl.clip_high = cfg.clip_high;
  pl.agg = cfg.loss_agg;
  pl.kl_coef = cfg.kl.in_reward ? 0.0 : cfg.kl.coef;
  pl.kl_estimator = cfg.kl.estimator;
  pl.entropy_coef = cfg.entropy_coef;
  pl.tis_cap = cfg.tis_cap;
  return pl;
}

}  // namespace hpcrl::algo
