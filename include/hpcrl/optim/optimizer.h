// The one optimizer a Trainer holds, whatever its memory layout: plain AdamW
// keeps full state per parameter on every rank and all-reduces the gradients
// over its data-parallel groups; ZeRO-1/2/3 (ShardedAdamW) reduce-scatter
// them and keep only this rank's shard of the state. A training step is
//
//   for each micro-batch:  begin_micro_batch(last), forward, backward
//   reduce_gradients()     the gradients averaged over each group
//   clip_grad_norm()       the global norm, gradients scaled to max_norm
//   step(lr) or not        (a non-finite norm skips or stops)
//   zero_grad()
//
// Checkpoints save state() per rank and resume with load_state() (same
// layout), or with load_resharded() from every saved rank when only the
// data-parallel size changed (reshard.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hpcrl/optim/reshard.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // --- the training step ---------------------------------------------------
  // Before each micro-batch's backward; `last` on the final one of the step.
  virtual void begin_micro_batch(bool last) = 0;
  // Whether gradients leave the parameters during the backward (ZeRO-2/3:
  // reduce-scattered bucket by bucket and param.grad released).
  virtual bool reduces_during_backward() const = 0;
  // After the last micro-batch's backward: the gradients this rank's update
  // reads, averaged over each data-parallel group.
  virtual void reduce_gradients() = 0;
  // This rank's part of the reduced gradient of parameter `name` (after
  // reduce_gradients()): the whole gradient, or this rank's shard of it, which
  // for a sharded optimizer must have a bucket of its own.
  virtual at::Tensor reduced_gradient(const std::string& name) const = 0;
  // The buffers the update reads (each parameter's gradient, or each group's
  // shard): a test hook writes a NaN into the first one.
  virtual std::vector<at::Tensor> reduced_gradients() const = 0;
  // Global L2 norm of the reduced gradients before clipping (tp, ep and pp
  // parts added as in grad_clip.h), gradients scaled so it is at most
  // `max_norm` (≤ 0: no clipping; a non-finite norm scales nothing).
  virtual double clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) = 0;
  // One AdamW update with learning rate `lr` (the schedule's value).
  virtual void step(double lr) = 0;
  // The gradients (and any reduced shards) cleared for the next step.
  virtual void zero_grad() = 0;
  // "the gradient of NAME" for the first parameter whose reduced gradient on
  // this rank holds a NaN or an inf, or "" when this rank's are finite.
  virtual std::string first_nonfinite_gradient() const = 0;

  // --- checkpoints -----------------------------------------------------------
  // Named tensors of this rank's state (for checkpoints), and back: load_state
  // throws InputError naming the key and what must match when the layout differs.
  virtual std::map<std::string, at::Tensor> state() const = 0;
  virtual void load_state(const std::map<std::string, at::Tensor>& state) = 0;
  // The state a run with another data-parallel size (the same model, tp, sp,
  // ep, pp and ZeRO stage) saved: `saved` holds the saved ranks' states in any
  // order. InputError when they do not hold this rank's part or were saved
  // without the replica keys that say which model shard each one is.
  virtual void load_resharded(const std::vector<SavedState>& saved) = 0;
  // Bytes of persistent optimizer state held by this rank (moments, fp32 masters).
  virtual int64_t state_bytes() const = 0;
  virtual int64_t steps() const = 0;
};

}  // namespace hpcrl::optim
