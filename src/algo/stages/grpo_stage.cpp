// The GRPO stage loop (see grpo_stage.h).
#include "hpcrl/algo/stages/grpo_stage.h"

#include <torch/utils.h>

#include <optional>

#include "hpcrl/algo/objectives/critic_free_advantages.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/stages/policy_run.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

StageResult run_grpo(StageEnv& env) {
  const config::GrpoStage& cfg = env.stage->grpo;
  Role& policy = env.role(cfg.policy);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  // It scores the policy's rows (unless on ranks of its own, where it gets them sent).
  if (reference && !on_own_ranks(*reference, policy)) check_same_rows(env.world, policy, *reference, env.stage->path);
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "grpo", rollout_role_of(env, cfg.policy));
  const int64_t n_mini = stage.minibatches_per_epoch();
  std::optional<Trainer> trainer;
  if (stage.trains()) trainer.emplace(policy, cfg.train, cfg.iterations * cfg.epochs * n_mini);
  PolicyTraining training;
  training.saved = {{&policy, trainer ? &trainer->optimizer() : nullptr}};
  const PolicyLossConfig pl = policy_loss_config(cfg);
  training.train = [&](Experience& exp, RlMetrics& m, int64_t it) {
    critic_free_advantages(cfg, pl.kl_estimator, policy, exp);
    stage.update(exp, *trainer, pl, it, m);
    if (trainer && trainer->skips_nonfinite())
      m.extra.emplace_back("nonfinite/skipped_steps", double(trainer->skipped_steps()));
  };
  training.lr = [&](int64_t it) { return trainer->lr(it * cfg.epochs * n_mini); };
  return run_policy_stage(env, stage, training);
}

}  // namespace hpcrl::algo
