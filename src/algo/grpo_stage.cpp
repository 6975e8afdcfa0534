// The GRPO stage loop (see grpo_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/grpo_stage.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>

#include "hpcrl/algo/advantages.h"
#include "hpcrl/algo/evaluation.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/policy_loss.h"
#include "hpcrl/algo/prompting.h"
#include "hpcrl/algo/reward_fn.h"
#include "hpcrl/algo/rl_common.h"
#include "hpcrl/algo/rollout_batch.h"
#include "hpcrl/algo/train_checkpoint.h"
#include "hpcrl/algo/train_step.h"
#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/algo/stage_loop.h"

namespace hpcrl::algo {

StageResult run_grpo(StageEnv& env) {
  const config::GrpoStage& cfg = env.stage->grpo;
  const auto& pipeline = *env.pipeline;
  Role& policy = env.role(cfg.policy);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  const DataSplits& data = env.data(cfg.data);
  const int world_rank = env.world->rank();
  StageResult result;

  if (reference) check_same_rows(env.world, policy, *reference, env.stage->path);  // it scores the policy's rows
  RlLoop loop(env, cfg, policy, reference, data, "grpo");
  const int64_t n_mini = loop.minibatches_per_epoch();
  Trainer trainer(policy, cfg.train, cfg.iterations * cfg.epochs * n_mini);
  std::vector<TrainedRole> saved{{&policy, &trainer.optimizer()}};
  int64_t start = loop.resume(saved);

  const PolicyLossConfig pl = policy_loss_config(cfg);

  StageLoop steps = loop.stage_loop(start, saved, result);
  steps.step = [&](int64_t it) -> std::string {
    trace::ScopedSpan iter_span("grpo/iteration", {{"step", double(it)}});
    auto t0 = std::chrono::steady_clock::now();
    RlMetrics m;
    Experience exp = loop.collect(it, m);  // rollout, reward, old/ref log-probs

    {
      trace::ScopedSpan span("grpo/advantage");
      if (exp.ref_logp.defined() && cfg.kl.in_reward && cfg.kl.coef != 0.0) {  // KL folded into the sequence reward
        at::Tensor kl = kl_estimate(exp.old_logp, exp.ref_logp, pl.kl_estimator);
        exp.scores = exp.scores - cfg.kl.coef * (kl * exp.batch.loss_mask).sum(1);
      }
      at::Tensor seq_adv = group_advantages(exp.scores, cfg.group, cfg.std_norm);  // [B]
      exp.advantages = seq_adv.unsqueeze(1) * exp.batch.loss_mask;               // [B, T]
    }
    loop.update(exp, trainer, pl, it, m);
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    loop.write_metrics(it + 1, m, trainer.lr(it * cfg.epochs * n_mini));
    return fmt::format("reward {:.3f}", m.reward_mean);
  };
  run_stage_loop(env, steps, result);
  return result;
}

}  // namespace hpcrl::algo
