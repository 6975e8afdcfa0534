// How one rank's rows of a step are cut into micro-batches, and the token
// layout each micro-batch runs in. Rows of a batch are right-padded to the
// longest row of the whole batch; a micro-batch instead runs
//   - its rows trimmed to their own longest row (always: padding past every
//     row's end costs compute and changes no real token), or
//   - packed (`packing: true`, veRL's remove-padding): its sequences laid end to
//     end in as few rows as fit, each with its own positions from 0 and a
//     segment id that keeps attention inside the sequence, so padded tokens
//     cost (almost) nothing.
// `micro_batch` caps the sequences of a micro-batch and `micro_batch_tokens`
// its tokens (rows × longest row, or the packed total), so long and short
// responses make micro-batches of similar cost. Micro-batches are consecutive
// rows, in order: the plan is deterministic and the step's loss does not
// depend on it (the losses are sums with global denominators).
//
// Per-token tensors of the batch (old log-probs, advantages, masks, loss
// weights) follow a micro-batch into its layout with gather(); per-token
// results come back with scatter().
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/pipeline_stage.h"

namespace hpcrl::algo {

struct MicroBatchOptions {
  int64_t max_rows = 0;    // sequences per micro-batch; 0 = no cap
  int64_t max_tokens = 0;  // tokens per micro-batch; 0 = no cap (a longer sequence runs alone)
  bool pack = false;       // several sequences per row
  int64_t multiple = 1;    // row length multiple (sequence parallelism splits rows evenly)
};

// A stage's train.micro_batch / micro_batch_tokens / packing, rows a multiple of `multiple`.
MicroBatchOptions micro_batch_options(const config::TrainHparams& train, int64_t multiple);

struct MicroBatch {
  int64_t begin = 0, end = 0;  // rows [begin, end) of the planned batch
  TokenBatch tokens;           // what the model runs: [R, L]
  at::Tensor source;           // [R, L] int64: flat index into the planned batch's [B·T] tokens, −1 = padding

  // A per-token tensor of the planned batch, [B, T, ...], in this micro-batch's
  // layout [R, L, ...] (0 on padding). Undefined stays undefined.
  at::Tensor gather(const at::Tensor& batch_values) const;
  // This sp rank's contiguous columns of gather() (all of it without sp).
  at::Tensor gather_chunk(const at::Tensor& batch_values, const dist::CommPtr& sp) const;
  // The inverse for results: [R, L, ...] → rows [begin, end) of the batch,
  // [end − begin, T, ...] (0 where no token).
  at::Tensor scatter(const at::Tensor& values, int64_t T) const;
};

// Consecutive micro-batches covering every row of `b` (none for an empty batch).
std::vector<MicroBatch> plan_micro_batches(const TokenBatch& b, const MicroBatchOptions& o);

// Per-token results of a forward-only pass (no grad) of a whole (pp = 1) role
// over a non-empty batch `b`: micro-batches as `micro` plans them for the
// role's sp, `head` on each one's final hidden states and sp shard (giving
// [R, L/sp, ...]), sp shards gathered, back in the batch's layout [B, T, ...]
// (0 past each row's end). The old/reference log-prob, value and teacher
// passes differ only in their head.
using PerTokenHead = std::function<at::Tensor(const at::Tensor& hidden, const TokenBatch& shard)>;
at::Tensor forward_per_token(Role& role, const TokenBatch& b, MicroBatchOptions micro, const PerTokenHead& head);

// The model's forward for a (sequence-sharded) micro-batch: packed rows bring
// their positions and segments, trimmed rows run plain causal.
model::ForwardOutput forward_tokens(model::DecoderModel& m, const TokenBatch& sb);
// The same inputs for a pipeline stage.
model::StageBatch stage_batch(const TokenBatch& sb);

}  // namespace hpcrl::algo
