// Running a GRPO or PPO stage's iterations, wherever its roles are placed:
// colocated (every rank generates, then trains: StageLoop) or with generation
// on ranks of its own (algo/remote/disaggregated_rl.h), synchronous or asynchronous.
// grpo_stage.cpp and ppo_stage.cpp hand over what their trainer does with an
// iteration's experience.
#pragma once

#include <functional>
#include <vector>

#include "hpcrl/algo/stages/policy_stage.h"

namespace hpcrl::algo {

// The trainer side of a stage. `saved` lists the roles a checkpoint holds on
// every rank (optimizer: null where the rank does not hold the role).
struct PolicyTraining {
  std::vector<TrainedRole> saved;
  // Advantages and optimizer steps of iteration `it` on its experience; adds metrics to m.
  std::function<void(Experience& exp, RlMetrics& m, int64_t it)> train;
  std::function<double(int64_t it)> lr;  // the policy's learning rate at iteration `it`
  // On a helper's own ranks (a PPO critic): its part of update `it`; unset elsewhere.
  std::function<void(int64_t it)> serve;
};

StageResult run_policy_stage(StageEnv& env, PolicyStage& stage, PolicyTraining& training);

}  // namespace hpcrl::algo
