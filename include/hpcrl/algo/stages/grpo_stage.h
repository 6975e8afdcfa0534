// GRPO (and its DAPO / Dr.GRPO variants): per iteration, sample prompts, roll
// out `group` responses each with the rollout engine, score them, compute
// group-relative advantages, get old (behaviour) and reference log-probs, and
// update the policy with the clipped surrogate over `epochs` passes of
// mini-batches. Spans: grpo/rollout, grpo/reward, grpo/old_logprob,
// grpo/ref_logprob, grpo/advantage, grpo/actor_update, grpo/weight_sync,
// grpo/checkpoint. Losses are normalised by global token/sequence counts, so a
// dp=2 run follows a dp=1 run with the same seed and global batch.
#pragma once

#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::algo {

StageResult run_grpo(StageEnv& env);

}  // namespace hpcrl::algo
