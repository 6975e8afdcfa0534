// The critic's forward-only pass: per-token values of a batch under a role
// with a value head (PPO's old values for GAE), without gradients. A
// pipelined critic (pp > 1) runs the value head on its last stage through the
// forward-only pipeline executor and broadcasts the values over pp, so every
// rank of the role ends up with the same [B, T] tensor it would compute at
// pp = 1 — exactly like the old/reference log-prob pass (rollout_batch.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/token_batch.h"

namespace hpcrl::algo {

// Values [B, T] float32 of every position of `b` (aligned with b.loss_mask;
// not masked; 0 past each row's end), in micro-batches as `micro` plans them
// for the role's sp (a pipelined role: rows of micro.max_rows, 0 = one);
// sequence-parallel shards are gathered back. Collective over the role's tp,
// sp, ep and pp groups.
at::Tensor forward_values(Role& role, const TokenBatch& b, const MicroBatchOptions& micro);

}  // namespace hpcrl::algo
