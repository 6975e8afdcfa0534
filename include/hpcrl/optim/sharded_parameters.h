// The parameter side of ZeRO-3: each rank stores only its shard of every
// bucket of a parameter set (ShardLayout::by_units, one bucket per forward
// unit), and a bucket's parameters hold data only while it is gathered.
//
// At construction every parameter becomes a view into its bucket's flat
// buffer [W·Sb], this rank's elements are copied into the shard [S], and the
// buffers' storage is freed. gather(b) allocates bucket b's buffer again and
// all-gathers the shards into it; release(b) frees it. The parameter tensors
// keep their identity throughout (modules, the optimizer's ParamSet and the
// autograd graph hold them), so a tensor saved for the backward is readable
// again once its bucket is gathered; reading a released one fails with
// LibTorch's "data is not allocated" error rather than reading stale memory.
// The optimizer updates shard() in place; the next gather brings the update.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/param_set.h"
#include "hpcrl/optim/shard_layout.h"

namespace hpcrl::optim {

// [S] this rank's owned elements of `params` as `options` (zero where the shard is padding).
at::Tensor owned_elements(const ParamSet& params, const ShardLayout& layout, const at::TensorOptions& options);
// Elements [s0, s0 + out.numel()) of this rank's shard, copied out of `params`
// into `out`; padding elements are 0.
void copy_owned_elements(const ParamSet& params, const ShardLayout& layout, int64_t s0, at::Tensor& out);

class ShardedParameters {
 public:
  // `params` hold their full values (identical on every rank of `group`);
  // `layout` is the group's. Not collective.
  ShardedParameters(const ParamSet& params, ShardLayout layout, dist::CommPtr group);
  ~ShardedParameters();
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  // Bucket b's parameters hold the shards' values on return; true if they
  // were not gathered before. Collective over the group unless already gathered
  // or prefetched.
  bool gather(size_t bucket);
  // Starts gathering bucket b behind the group's other asynchronous work
  // (gather() waits for it). Collective; does nothing if b is gathered or on its way.
  void prefetch(size_t bucket);
  // Frees bucket b's parameter data (waits for a prefetch first). Local.
  void release(size_t bucket);
  // Copies this rank's elements of gathered bucket b back into the shard:
  // whoever wrote into the parameters keeps what they wrote. Local.
  void write_back(size_t bucket);
  bool gathered(size_t bucket) const { return slots_.at(bucket).state == kGathered; }

  // Gathers every bucket for good: the parameters are ordinary tensors again and
  // this object no longer frees them. Collective.
  void unshard();

  // [S] this rank's parameter elements (dtype of the parameters).
  at::Tensor& shard() { return shard_; }
  const ShardLayout& layout() const { return layout_; }
  // The most bytes of gathered buckets held at once since construction.
  int64_t peak_gathered_bytes() const { return peak_; }

 private:
  enum State { kReleased, kInFlight, kGathered };
  struct Slot {
    at::Tensor full;  // [W·Sb] the bucket's parameters end to end; its storage is freed while released
    State state = kGathered;
    dist::WorkPtr work;  // the prefetch, while in flight
  };
  at::Tensor mine(size_t bucket) const;  // [Sb] this rank's slice of the shard
  void allocate(Slot& s);

  ShardLayout layout_;
  dist::CommPtr group_;
  std::vector<Slot> slots_;
  at::Tensor shard_;
  bool unsharded_ = false;
  int64_t held_ = 0, peak_ = 0;
};

}  // namespace hpcrl::optim
