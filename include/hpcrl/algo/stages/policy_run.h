// Running a GRPO or PPO stage's iterations, wherever its roles are placed:
// colocated (every rank generates, then trains: StageLoop) or with generation
// on ranks of its own (algo/stages/disaggregated_rl.h), synchronous or asynchronous.
// grpo_stage.cpp and ppo_stage.cpp hand over what their trainer does with an
// iteration's experience.
#pragma once

#include <vector>

#include "hpcrl/algo/stages/policy_stage.h"

namespace hpcrl::algo {

// The trainer side of a GRPO or PPO stage: what it does with an iteration's
// experience (advantages, then the actor's and a critic's steps), one
// implementation per stage kind (grpo_stage.cpp, ppo_stage.cpp).
class PolicyTraining {
 public:
  virtual ~PolicyTraining() = default;
  // The roles a checkpoint holds, on every rank (optimizer: null where the rank does not hold the role).
  const std::vector<TrainedRole>& saved() const { return saved_; }
  // Advantages and optimizer steps of iteration `it` on its experience; adds metrics to m.
  virtual void train(Experience& exp, RlMetrics& m, int64_t it) = 0;
  // The policy's learning rate at iteration `it`.
  virtual double lr(int64_t it) const = 0;
  // On a helper's own ranks (a PPO critic): its part of update `it`. Nothing elsewhere.
  virtual void serve(int64_t it) { (void)it; }

 protected:
  std::vector<TrainedRole> saved_;
};

StageResult run_policy_stage(StageEnv& env, PolicyStage& stage, PolicyTraining& training);

}  // namespace hpcrl::algo
