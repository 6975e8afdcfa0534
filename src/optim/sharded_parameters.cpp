// ZeRO-3 parameter storage (sharded_parameters.h).
//
// Freeing a bucket empties the storage its parameters view (data pointer null,
// size 0) instead of replacing the tensors: the version counters stay as they
// are, so autograd accepts the refilled tensors it saved in the forward (the
// same trick as PyTorch FSDP's storage resize).
#include "hpcrl/optim/sharded_parameters.h"

#include <c10/core/StorageImpl.h>
#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

namespace {
void free_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
  s->set_nbytes(0);
}
}  // namespace

at::Tensor owned_elements(const ParamSet& ps, const ShardLayout& l, const at::TensorOptions& options) {
  at::Tensor owned = at::empty({l.shard}, options);
  copy_owned_elements(ps, l, 0, owned);
  return owned;
}

void copy_owned_elements(const ParamSet& ps, const ShardLayout& l, int64_t s0, at::Tensor& out) {
  torch::NoGradGuard no_grad;
  out.zero_();
  const int64_t n = out.numel();
  for (const auto& s : l.segments) {
    const int64_t lo = std::max(s0, s.shard_offset), hi = std::min(s0 + n, s.shard_offset + s.length);
    if (lo >= hi) continue;
    const int64_t from = s.param_offset + lo - s.shard_offset;
    out.slice(0, lo - s0, hi - s0).copy_(ps[s.param].tensor.detach().reshape(-1).slice(0, from, from + hi - lo));
  }
}

ShardedParameters::ShardedParameters(const ParamSet& params, ShardLayout layout, dist::CommPtr group)
    : layout_(std::move(layout)), group_(std::move(group)) {
  torch::NoGradGuard no_grad;
  const int size = group_ ? group_->size() : 1;
  HPCRL_CHECK(layout_.size == size, "ZeRO-3 layout for a group of " << layout_.size << " used on one of " << size);
  if (params.empty()) return;
  const auto options = params.front().tensor.options().requires_grad(false);
  shard_ = owned_elements(params, layout_, options);
  slots_.resize(layout_.buckets.size());
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    const ShardLayout::Bucket& bucket = layout_.buckets[b];
    Slot& s = slots_[b];
    s.full = at::zeros({bucket.shard * size}, options);
    held_ += int64_t(s.full.nbytes());
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      const at::Tensor& p = params[bucket.params[j]].tensor;
      HPCRL_CHECK(p.scalar_type() == options.dtype() && p.device() == options.device(),
                  "ZeRO-3: parameter " << params[bucket.params[j]].name << " is " << p.scalar_type() << " on "
                  << p.device() << ", its bucket " << options.dtype() << " on " << options.device());
      at::Tensor view = s.full.slice(0, bucket.offsets[j], bucket.offsets[j] + p.numel()).view(p.sizes());
      view.copy_(p.detach());
      p.set_data(view);  // same tensor (modules and autograd keep it), storage of the bucket
    }
    release(b);
  }
  peak_ = held_;
}

ShardedParameters::~ShardedParameters() {
  for (auto& s : slots_)
    if (s.work) s.work->wait();  // the communication thread must not write into a buffer nobody tracks
}

at::Tensor ShardedParameters::mine(size_t b) const {
  const ShardLayout::Bucket& bucket = layout_.buckets.at(b);
  return shard_.slice(0, bucket.shard_offset, bucket.shard_offset + bucket.shard);
}

void ShardedParameters::allocate(Slot& s) {
  c10::StorageImpl* storage = s.full.storage().unsafeGetStorageImpl();
  const size_t bytes = s.full.numel() * s.full.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  held_ += int64_t(bytes);
  peak_ = std::max(peak_, held_);
}

bool ShardedParameters::gather(size_t b) {
  Slot& s = slots_.at(b);
  if (s.state == kGathered) return false;
  torch::NoGradGuard no_grad;
  if (s.state == kInFlight) {
    s.work->wait();
    s.work.reset();
  } else {
    allocate(s);
    if (layout_.size > 1) group_->all_gather_into(s.full, mine(b));
    else s.full.copy_(mine(b));
  }
  s.state = kGathered;
  return true;
}

void ShardedParameters::prefetch(size_t b) {
  Slot& s = slots_.at(b);
  if (s.state != kReleased) return;
  torch::NoGradGuard no_grad;
  allocate(s);
  if (layout_.size > 1) {
    s.work = group_->all_gather_async(s.full, mine(b));
    s.state = kInFlight;
  } else {
    s.full.copy_(mine(b));
    s.state = kGathered;
  }
}

void ShardedParameters::release(size_t b) {
  Slot& s = slots_.at(b);
  if (unsharded_ || s.state == kReleased) return;
  if (s.work) s.work->wait(), s.work.reset();
  held_ -= int64_t(s.full.numel() * s.full.element_size());
  free_storage(s.full);
  s.state = kReleased;
}

void ShardedParameters::write_back(size_t b) {
  HPCRL_CHECK(gathered(b), "ZeRO-3: write_back of bucket " << b << ", which is not gathered");
  torch::NoGradGuard no_grad;
  const int64_t sb = layout_.buckets[b].shard;
  mine(b).copy_(slots_[b].full.slice(0, layout_.rank * sb, (layout_.rank + 1) * sb));
}

void ShardedParameters::unshard() {
  for (size_t b = 0; b < slots_.size(); ++b) gather(b);
  unsharded_ = true;
}

}  // namespace hpcrl::optim
