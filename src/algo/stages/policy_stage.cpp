// The policy stage's set-up, metrics, evaluation and checkpoints (policy_stage.h).
#include "hpcrl/algo/stages/policy_stage.h"

#include <spdlog/spdlog.h>

#include <numeric>

#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/stages/rollout_copy.h"
#include "hpcrl/algo/remote/sample_transfer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

PolicyStage::PolicyStage(StageEnv& env, const config::RlStage& cfg, Role& policy, Role* reference,
                         const DataSplits& data, std::string stage_name, Role* generator)
    : env_(env), cfg_(cfg), policy_(policy), generator_(generator ? *generator : policy), reference_(reference),
      data_(data), name_(std::move(stage_name)), rewards_(env, cfg.rewards, generator_, cfg.train.micro_batch, name_),
      generation_stops_(env, generator_), eval_stops_(env, policy_) {
  // Prompts are built where they are generated or evaluated: on the policy's and the generator's ranks
  // (a reference or critic of its own only answers the trainer; validation gives every rank a role).
  const Role* here = policy.member() ? &policy : generator_.member() ? &generator_ : nullptr;
  if (here) prompts_ = std::make_unique<PromptBuilder>(*here->tokenizer, env.pipeline->find_data(cfg.data));
  sampler_ = std::make_unique<io::DataSampler>(data.train.size(),
                                               static_cast<uint64_t>(env.pipeline->run.seed) + 17u * env.stage_index,
                                               env.pipeline->find_data(cfg.data)->shuffle,
                                               io::content_hash(data.train));
  // A pipelined policy samples from its pp = 1 copy, refreshed at each produce().
  if (generator_.member()) {
    auto model = sync_rollout_model(generator_);
    rollout::EngineOptions options{generator_.config->rollout.max_batch, true};
    options.abandon = generation_stops_.engine_hook(*model, "rollout");
    engine_ = std::make_unique<rollout::Engine>(model, generator_.tokenizer.get(), options);
  }
  if (reference && on_own_ranks(*reference, policy))
    remote_reference_ = std::make_unique<RemoteReference>(*reference, policy, env.world->size(), cfg.train,
                                                          sampling_temperature(cfg), name_);
  if (resharded()) {
    redeal_ = std::make_unique<SampleChannel>(generator_, policy_,
                                              dist::new_group(all_ranks(env.world->size()), name_ + "/redeal"), cfg.group);
  }
}

PolicyStage::~PolicyStage() = default;

void PolicyStage::serve_reference() { remote_reference_->serve(); }

void PolicyStage::serve_rewards() { rewards_.serve_iteration(); }

int64_t PolicyStage::minibatches_per_epoch() const {
  const int64_t total = cfg_.prompts * cfg_.group;
  const int64_t mini = cfg_.mini_batch > 0 ? cfg_.mini_batch : total;
  return std::max<int64_t>(1, total / mini);
}

void PolicyStage::timed(const std::string& phase, RlMetrics& m, const std::function<void()>& fn) {
  double seconds = 0;
  {
    trace::TimedSpan span(name_ + "/" + phase);
    fn();
    seconds = span.elapsed_seconds();
  }
  for (auto& [k, v] : m.seconds_by_span)
    if (k == phase) return void(v += seconds);
  m.seconds_by_span.emplace_back(phase, seconds);
}

int64_t PolicyStage::resume(const std::vector<TrainedRole>& saved, bool* eval_owed) {
  return resume_stage(env_, saved, *sampler_, name_, eval_owed);
}

void PolicyStage::checkpoint(int64_t iteration, const std::vector<TrainedRole>& saved, bool eval_owed) {
  checkpoint_stage(env_, iteration, saved, *sampler_, name_, eval_owed);
}

void PolicyStage::evaluate(int64_t step, StageResult& result) {
  if (data_.eval.size() == 0) return;
  EvalOptions options = eval_options(*env_.pipeline);
  options.stops = &eval_stops_;
  auto r = algo::evaluate(policy_, data_.eval, *prompts_, rewards_.verifier(), options);
  result.eval_accuracy = r.accuracy;
  result.eval_loss = r.loss;
  spdlog::info("{} iteration {}: eval accuracy {:.3f}, loss {:.4f} ({} examples, {:.1f}s)", name_, step, r.accuracy,
               r.loss, r.examples, r.seconds);
  if (env_.metrics)
    env_.metrics->write(name_, env_.stage_index, step,
                        {{"eval/accuracy", r.accuracy}, {"eval/loss", r.loss},
                         {"eval/response_len", r.response_len}, {"seconds/eval", r.seconds}});
  if (env_.metrics) env_.metrics->write_samples(name_, env_.stage_index, step, r.samples);
}

void PolicyStage::write_metrics(int64_t step, const RlMetrics& m, double lr) {
  if (!env_.metrics) return;
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
  if (cfg_.dynamic_sampling) {
    out.emplace_back("dynamic_sampling/kept_groups", m.kept_groups);
    out.emplace_back("dynamic_sampling/rounds", m.sampling_rounds);
  }
  for (const auto& [k, v] : m.seconds_by_span) out.emplace_back("seconds/" + k, v);
  for (const auto& kv : m.extra) out.push_back(kv);
  env_.metrics->write(name_, env_.stage_index, step, out);
}

StageLoop PolicyStage::stage_loop(int64_t start, bool eval_owed, const std::vector<TrainedRole>& saved,
                                  StageResult& result) {
  StageLoop steps;
  steps.name = name_;
  steps.unit = "iter";
  steps.start = start;
  steps.eval_owed = eval_owed;
  steps.total = cfg_.iterations;
  steps.eval_every = cfg_.eval_every;
  steps.stop_at_accuracy = cfg_.stop_at_accuracy;
  steps.evaluate = [this, &result](int64_t it) { evaluate(it, result); };
  steps.checkpoint = [this, &saved](int64_t it, bool owed) { checkpoint(it, saved, owed); };
  steps.rewind = [this] { sampler_->restore(iteration_start_, name_ + "'s data position at the iteration's start"); };
  return steps;
}

double sampling_temperature(const config::RlStage& cfg) {
  return cfg.sampling.temperature > 0 ? cfg.sampling.temperature : 1.0;
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
