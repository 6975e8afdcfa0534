// What a training stage and its checkpoints need from an optimizer, whatever
// its memory layout: plain AdamW keeps full state per parameter on every rank,
// ZeRO-1 keeps only this rank's shard of a flat buffer. Checkpoints save
// state() per rank and resume with load_state() (same layout), or with
// load_resharded() from every saved rank when only the data-parallel size
// changed (reshard.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hpcrl/optim/reshard.h"

namespace hpcrl::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
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
