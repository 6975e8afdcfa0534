// The GRPO stage loop (see grpo_stage.h).
#include "hpcrl/algo/grpo_stage.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "hpcrl/algo/advantages.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/policy_stage.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
// Group-relative advantages of the experience's sequence rewards, with the KL
// to the reference folded into the reward when the stage says so.
void grpo_advantages(const config::GrpoStage& cfg, const PolicyLossConfig& pl, Experience& exp) {
  trace::ScopedSpan span("grpo/advantage");
  if (exp.ref_logp.defined() && cfg.kl.in_reward && cfg.kl.coef != 0.0) {
    at::Tensor kl = kl_estimate(exp.old_logp, exp.ref_logp, pl.kl_estimator);
    exp.scores = exp.scores - cfg.kl.coef * (kl * exp.batch.loss_mask).sum(1);
  }
  at::Tensor seq_adv = group_advantages(exp.scores, cfg.group, cfg.std_norm);  // [B]
  exp.advantages = seq_adv.unsqueeze(1) * exp.batch.loss_mask;               // [B, T]
}
}  // namespace

StageResult run_grpo(StageEnv& env) {
  const config::GrpoStage& cfg = env.stage->grpo;
  Role& policy = env.role(cfg.policy);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  StageResult result;

  if (reference) check_same_rows(env.world, policy, *reference, env.stage->path);  // it scores the policy's rows
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "grpo");
  const int64_t n_mini = stage.minibatches_per_epoch();
  Trainer trainer(policy, cfg.train, cfg.iterations * cfg.epochs * n_mini);
  std::vector<TrainedRole> saved{{&policy, &trainer.optimizer()}};
  const int64_t start = stage.resume(saved);
  const PolicyLossConfig pl = policy_loss_config(cfg);

  StageLoop steps = stage.stage_loop(start, saved, result);
  steps.step = [&](int64_t it) -> std::string {
    trace::TimedSpan iter_span("grpo/iteration", {{"step", double(it)}});
    RlMetrics m;
    Experience exp = stage.collect(it, m);  // rollout, reward, old/ref log-probs
    grpo_advantages(cfg, pl, exp);
    stage.update(exp, trainer, pl, it, m);
    m.seconds = iter_span.elapsed_seconds();
    stage.write_metrics(it + 1, m, trainer.lr(it * cfg.epochs * n_mini));
    return fmt::format("reward {:.3f}", m.reward_mean);
  };
  run_stage_loop(env, steps, result);
  return result;
}

}  // namespace hpcrl::algo
