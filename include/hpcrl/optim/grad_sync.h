// Data-parallel gradient averaging, bucketed and overlapped with backward (the
// DDP reducer's idea): parameters are grouped into ~bucket_bytes buckets in
// reverse registration order (roughly the order backward produces them); a hook
// on each parameter's gradient accumulator marks it ready, and when a bucket is
// complete its flattened gradients are all-reduced asynchronously on the
// communication thread while backward continues. finish() waits and writes the
// averaged gradients back. Only the last micro-batch of a step syncs.
#pragma once

#include <memory>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/accumulator_hooks.h"
#include "hpcrl/optim/param_set.h"

namespace hpcrl::optim {

class GradSync {
 public:
  // `group` is the dp·sp group (null or size 1: no communication at all).
  GradSync(const ParamSet& params, dist::CommPtr group, size_t bucket_bytes = 8u << 20);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call before the backward of each micro-batch: `sync` is true on the last one.
  void prepare(bool sync);
  // Waits for every bucket (launching any that never became ready, e.g. unused
  // parameters) and copies the averaged gradients back into param.grad().
  void finish();

  size_t num_buckets() const;
  int64_t bytes_per_step() const;  // bytes all-reduced per synced step

  struct State;  // shared with the accumulator hooks

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<AccumulatorHooks> hooks_;
};

}  // namespace hpcrl::optim
