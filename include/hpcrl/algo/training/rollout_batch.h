// One RL iteration's experience on this rank: the sampled responses of its
// prompts with everything the update needs per token (behaviour and reference
// log-probs, advantages, mask) in one TokenBatch-aligned layout, plus the
// per-sequence rewards for metrics. Built by the GRPO and PPO loops.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/rollout/engine.h"

namespace hpcrl::algo {

struct Experience {
  TokenBatch batch;       // prompts + responses, [B, T]
  at::Tensor old_logp;    // [B, T] old-policy log-probs at loss_mask positions (0 elsewhere)
  // The update takes old_logp from its own forward (one optimizer step a batch; the same on
  // every rank of the stage): old_logp is undefined, and the update reports the importance
  // weights of a decoupled objective and, when engine_logp is set, the mismatch.
  bool old_from_update = false;
  at::Tensor engine_logp;     // [B, T] the engine's log-probs, when the update measures the mismatch
  at::Tensor behaviour_logp;  // [B, T] the engine's, when old_logp is the trainer's (decoupled objective)
  at::Tensor ref_logp;    // [B, T] reference log-probs (undefined without a reference)
  at::Tensor advantages;  // [B, T]
  at::Tensor scores;      // [B] sequence rewards
  std::vector<bool> truncated;  // finish_reason == "length"
};

// Scatters per-response values (one list per row) into a [B, T] tensor aligned with b.loss_mask.
at::Tensor scatter_response_values(const TokenBatch& b, const std::vector<std::vector<float>>& values);

// Per-token log-probs of the batch's targets under `role`'s model (no grad),
// in micro-batches as `micro` plans them for the role's sp (trimmed or packed; a pipelined role
// runs row micro-batches of micro.max_rows); sequence-parallel roles get their
// shard gathered back. [B, T].
// temperature: of softmax(logits / temperature), the distribution RL samples from.
at::Tensor forward_logprobs(Role& role, const TokenBatch& b, const MicroBatchOptions& micro, double temperature = 1.0);

}  // namespace hpcrl::algo
