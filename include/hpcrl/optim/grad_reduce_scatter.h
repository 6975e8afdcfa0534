// The gradients of a sharded parameter set, averaged over a data-parallel group
// and delivered as this rank's shard only (ShardLayout): the gradient side of
// ZeRO-1 and ZeRO-2.
//
// Each bucket's gradients are copied into a flat buffer and reduce-scattered
// (averaged) into the rank's shard, which sums what every micro-batch
// contributes. Where they come from:
//   streaming (ZeRO-2): a hook on each parameter's gradient accumulator takes
//       the micro-batch's gradient as soon as the backward has produced it and
//       releases param.grad; a full bucket is reduced asynchronously while the
//       backward goes on, and at most kInFlight buckets are waited for, so a
//       rank holds the gradient shard plus a few buckets, never the full
//       gradient. Because the reduction is linear, a gradient that arrives
//       after its bucket was sent (a parameter used again in a later backward)
//       simply opens another round of that bucket.
//   not streaming (ZeRO-1): nothing happens during the backward; finish()
//       reduces the accumulated param.grad of every bucket and releases it.
// A parameter with no gradient counts as zero, as in the dp all-reduce.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/accumulator_hooks.h"
#include "hpcrl/optim/param_set.h"
#include "hpcrl/optim/shard_layout.h"

namespace hpcrl::optim {

class GradReduceScatter {
 public:
  static constexpr int kInFlight = kZero2BucketsInFlight;  // reduced buckets not yet waited for

  // `group`: the ranks holding identical copies of `params` (null: just this
  // rank; then the shard is the whole gradient). The layout's size and rank
  // must be the group's.
  GradReduceScatter(const ParamSet& params, ShardLayout layout, dist::CommPtr group, bool streaming);
  ~GradReduceScatter();
  GradReduceScatter(const GradReduceScatter&) = delete;
  GradReduceScatter& operator=(const GradReduceScatter&) = delete;

  // Before each micro-batch's backward (streaming): sends what the previous
  // backward left in incomplete buckets, so every micro-batch starts empty.
  void begin_micro_batch();
  // After the last backward: every remaining gradient reduced; returns the
  // shard [S] (dtype of the parameters) and starts the next step from zero.
  at::Tensor finish();

  // Calls fn(bucket) once per pass when every parameter of the bucket has
  // handed over its gradient: the backward no longer reads them (ZeRO-3 frees
  // the bucket's gathered parameters then). Runs with the reducer locked, on
  // the thread of the backward.
  void on_bucket_complete(std::function<void(size_t)> fn);

  const ShardLayout& layout() const;
  // Most bytes this object held at once in gradients since construction: the
  // shard, the bucket buffers, and a gradient handed to a hook until it is released.
  int64_t peak_bytes() const;

  struct State;  // shared with the accumulator hooks

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<AccumulatorHooks> hooks_;  // streaming only
};

}  // namespace hpcrl::optim
