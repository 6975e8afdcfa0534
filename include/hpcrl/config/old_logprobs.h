// Where a GRPO/PPO stage's old log-probs (π_old of its surrogate) come from,
// decided from its config alone: the rule the stage runs by
// (algo/stages/policy_plan.h) and the cost model estimates by
// (cost/stage_estimate.cpp).
#pragma once

#include <cstdint>

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

enum class OldLogprobs {
  kEngine,         // the engine's, reported while sampling (recompute_old_logprobs: false)
  kPass,           // the trainer's forward over the samples before the update (recomputed)
  kUpdateForward,  // recomputed, but the batch takes one optimizer step, so π_old is the policy at the
                   // update's start: the update's own forward, detached; no pass of its own
};

// Optimizer steps per epoch of a GRPO/PPO batch: prompts·group over mini_batch (at least one).
int64_t minibatches_per_epoch(const RlStage& cfg);

// The engine's unless recomputed; recomputed by the update's own forward when the batch takes one
// optimizer step (epochs 1, one mini-batch) and nothing reads π_old before the update (the KL to a
// reference folded into the reward does); by a pass otherwise.
OldLogprobs old_logprob_source(const RlStage& cfg);

}  // namespace hpcrl::config
