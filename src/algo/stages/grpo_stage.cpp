// The GRPO stage loop (see grpo_stage.h).
#include "hpcrl/algo/stages/grpo_stage.h"

#include <torch/utils.h>

#include <optional>

#include "hpcrl/algo/objectives/critic_free_advantages.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/stages/policy_run.h"
#include "hpcrl/algo/training/pipeline_train.h"

namespace hpcrl::algo {

namespace {
// GRPO's trainer: critic-free advantages, then the actor's update.
class GrpoTraining : public PolicyTraining {
 public:
  GrpoTraining(const config::GrpoStage& cfg, PolicyStage& stage)
      : cfg_(cfg), stage_(stage), pl_(policy_loss_config(cfg)), n_mini_(stage.actor().minibatches_per_epoch()) {
    if (stage.plan().trains) trainer_.emplace(stage.policy(), cfg.train, cfg.iterations * cfg.epochs * n_mini_);
    saved_ = {{&stage.policy(), trainer_ ? &trainer_->optimizer() : nullptr}};
  }

  void train(Experience& exp, RlMetrics& m, int64_t it) override {
    critic_free_advantages(cfg_, pl_.kl_estimator, stage_.policy(), exp);
    stage_.actor().update(exp, *trainer_, pl_, it, m);
    if (trainer_ && trainer_->skips_nonfinite())
      m.extra.emplace_back("nonfinite/skipped_steps", double(trainer_->skipped_steps()));
  }

  double lr(int64_t it) const override { return trainer_->lr(it * cfg_.epochs * n_mini_); }

 private:
  const config::GrpoStage& cfg_;
  PolicyStage& stage_;
  const PolicyLossConfig pl_;
  const int64_t n_mini_;
  std::optional<Trainer> trainer_;
};
}  // namespace

StageResult run_grpo(StageEnv& env) {
  const config::GrpoStage& cfg = std::get<config::GrpoStage>(env.stage->body);
  Role& policy = env.role(cfg.policy);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  // It scores the policy's rows (unless on ranks of its own, where it gets them sent).
  if (reference && !on_own_ranks(*reference, policy)) check_same_rows(env.world, policy, *reference, env.stage->path);
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "grpo", env.rollout_role(cfg.policy));
  GrpoTraining training(cfg, stage);
  return run_policy_stage(env, stage, training);
}

}  // namespace hpcrl::algo
