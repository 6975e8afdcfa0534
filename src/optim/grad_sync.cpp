// Bucketed, overlapped data-parallel gradient averaging (see grad_sync.h).
#include "hpcrl/optim/grad_sync.h"

#include <torch/utils.h>

#include <mutex>

#include "hpcrl/optim/shard_layout.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::optim {

struct Bucket {
  std::vector<at::Tensor> params;
  int ready = 0;
  at::Tensor flat;  // [numel of all grads], dtype of the grads
  dist::WorkPtr work;
};

struct GradSync::State {
  dist::CommPtr group;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // param index -> bucket
  bool sync = false;
  std::mutex mu;  // hooks may run on autograd worker threads

  void launch(Bucket& b) {
    std::vector<at::Tensor> grads;
    grads.reserve(b.params.size());
    for (auto& p : b.params) {
      at::Tensor g = p.grad();
      grads.push_back(g.defined() ? g.reshape({-1}) : at::zeros({p.numel()}, p.options()));
    }
    b.flat = at::cat(grads);
    b.work = group->all_reduce_async(b.flat, dist::ReduceOp::kAvg);
  }
};

GradSync::GradSync(const ParamSet& params, dist::CommPtr group, size_t bucket_bytes)
    : state_(std::make_shared<State>()) {
  state_->group = std::move(group);
  if (!state_->group || state_->group->size() == 1) return;
  // The buckets ZeRO-2 would cut, counted in bytes rather than elements (a group may mix dtypes).
  std::vector<int64_t> bytes;
  for (const auto& p : params) bytes.push_back(int64_t(p.tensor.numel() * p.tensor.element_size()));
  const ShardLayout layout = ShardLayout::bucketed(bytes, int64_t(bucket_bytes), 1, 0);
  state_->bucket_of.resize(params.size());
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    state_->buckets.emplace_back();
    for (size_t k : layout.buckets[b].params) {
      state_->buckets.back().params.push_back(params[k].tensor);
      state_->bucket_of[k] = b;
    }
  }
  // Runs after AccumulateGrad has added this micro-batch's gradient into param.grad.
  hooks_ = std::make_unique<AccumulatorHooks>(params, [state = state_](size_t k) {
    std::lock_guard<std::mutex> lock(state->mu);
    if (!state->sync) return;
    Bucket& b = state->buckets[state->bucket_of[k]];
    if (++b.ready == static_cast<int>(b.params.size())) state->launch(b);
  });
}

GradSync::~GradSync() = default;

void GradSync::prepare(bool sync) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->sync = sync;
  for (auto& b : state_->buckets) {
    b.ready = 0;
    b.work.reset();
  }
}

void GradSync::finish() {
  if (state_->buckets.empty()) return;
  trace::ScopedSpan span("grad_sync/wait");
  std::lock_guard<std::mutex> lock(state_->mu);
  torch::NoGradGuard no_grad;
  for (auto& b : state_->buckets) {
    if (!b.work) state_->launch(b);
    b.work->wait();
    int64_t off = 0;
    for (auto& p : b.params) {
      int64_t n = p.numel();
      at::Tensor avg = b.flat.slice(0, off, off + n).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(avg);
      else p.mutable_grad() = avg.clone();
      off += n;
    }
    b.flat = at::Tensor();  // a full copy of the gradients: not kept until the next step
    b.work.reset();
    b.ready = 0;
  }
  state_->sync = false;
}

size_t GradSync::num_buckets() const { return state_->buckets.size(); }

int64_t GradSync::bytes_per_step() const {
  int64_t bytes = 0;
  for (auto& b : state_->buckets)
    for (auto& p : b.params) bytes += p.numel() * p.element_size();
  return bytes;
}

}  // namespace hpcrl::optim
