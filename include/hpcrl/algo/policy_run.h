// Running a GRPO or PPO stage's iterations, wherever its roles are placed:
// colocated (every rank generates, then trains: StageLoop) or with generation
// on ranks of its own (algo/disaggregated_rl.h), synchronous or asynchronous.
// grpo_stage.cpp and ppo_stage.cpp hand over what their trainer does with an
// iteration's experience.
#pragma once

#include <functional>
#include <vector>

#include "hpcrl/algo/policy_stage.h"

namespace hpcrl::algo {

// The trainer side of a stage, set on the ranks that train the policy.
struct PolicyTraining {
  std::vector<TrainedRole> saved;  // roles and optimizers a checkpoint holds
  // Advantages and optimizer steps of iteration `it` on its experience; adds metrics to m.
  std::function<void(Experience& exp, RlMetrics& m, int64_t it)> train;
  std::function<double(int64_t it)> lr;  // the policy's learning rate at iteration `it`
};

StageResult run_policy_stage(StageEnv& env, PolicyStage& stage, PolicyTraining& training);

}  // namespace hpcrl::algo
