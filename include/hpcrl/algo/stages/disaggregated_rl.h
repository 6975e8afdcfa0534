// A GRPO/PPO stage whose generation runs on ranks of its own (`<policy>.rollout`
// beside `<policy>` in placement.ranges): the executor of algo/stages/rl_rounds.h's
// plan. Generating ranks draw prompts, sample, score and send the kept samples
// to the trainer's ranks; the trainer computes old/reference log-probs,
// advantages and updates, and sends new weights back at each sync (one trainer
// rank broadcasts the full tensors over a bridge to every generating rank;
// each loads its slices of its own layout). With async.max_staleness = k > 0
// the generator samples up to k versions ahead; a sample staler than k when its
// update comes is dropped and counted (the plan never produces one).
//
// Every sync is also the stage's stop check, collective over the world: a
// preemption signal on any rank, or an early stop the trainer's evaluation
// reached, ends every rank there with the trainer's checkpoint (taken over the
// ranks of the roles it holds, the trainer's and a critic's own, so generating
// ranks need not join). In-flight samples
// are not saved: a resumed run regenerates them with the checkpoint's weights,
// which repeats the original run exactly when max_staleness is 0.
#pragma once

#include "hpcrl/algo/stages/policy_run.h"

namespace hpcrl::algo {

// training.saved() is set on every rank (optimizers where the rank holds the role).
StageResult run_disaggregated(StageEnv& env, PolicyStage& stage, PolicyTraining& training);

}  // namespace hpcrl::algo
