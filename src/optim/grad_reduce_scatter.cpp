// Gradients reduce-scattered bucket by bucket into this rank's shard (see
// grad_reduce_scatter.h).
#include "hpcrl/optim/grad_reduce_scatter.h"

#include <torch/utils.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

namespace {
// A bucket's buffer from its first gradient until its reduction has been added to the shard.
struct Round {
  size_t bucket = 0;
  at::Tensor flat;  // [W·Sb] the sum of the gradients taken so far, zero elsewhere
  at::Tensor out;   // [Sb] this rank's part of their average
  dist::WorkPtr work;
  bool into_shard = false;  // `out` is the bucket's slice of the shard itself (its first round of the step)
  std::vector<bool> taken;  // per parameter of the bucket
  size_t ready = 0;         // parameters taken at least once
  bool late = false;        // opened after the bucket was sent in this pass: sent by flush()
};
}  // namespace

// Every rank must issue the group's reductions in one order. A pass (one
// backward, up to begin_micro_batch or finish) therefore sends complete buckets
// strictly in bucket order, flush() sends what is left in bucket order, then
// the late rounds in bucket order: the sequence depends on which parameters get
// gradients and how often, which is the same on every rank, not on timing.
struct GradReduceScatter::State {
  ParamSet params;
  ShardLayout layout;
  dist::CommPtr group;
  std::vector<std::pair<size_t, size_t>> place;  // parameter -> (bucket, position in the bucket)
  std::vector<Round> open;                       // per bucket; flat undefined while nothing is taken
  size_t next = 0;                               // the bucket this pass sends next
  std::deque<Round> sent;                        // reductions not yet added, oldest first
  at::Tensor shard;                              // [S] the sum over micro-batches of the averages
  std::vector<bool> reduced;                     // per bucket: its shard slice holds a round of this step
  int64_t held = 0, peak = 0;                    // gradient bytes held by this object
  std::mutex mu;                                 // hooks may run on autograd worker threads
  std::function<void(size_t)> on_complete;       // see GradReduceScatter::on_bucket_complete

  bool communicates() const { return group && group->size() > 1; }

  // Adds parameter k's gradient into its bucket and releases param.grad.
  void take(size_t k) {
    at::Tensor& grad = params[k].tensor.mutable_grad();
    if (!grad.defined()) return;
    const size_t b = place[k].first, j = place[k].second;
    Round& r = open[b];
    const ShardLayout::Bucket& bucket = layout.buckets[b];
    if (!r.flat.defined() && bucket.params.size() == 1 && bucket.numel == bucket.shard * layout.size &&
        grad.is_contiguous()) {
      // A parameter that is a bucket of its own and needs no padding (an embedding, most
      // large matrices): its gradient is the flat buffer, so it is not held twice.
      start(b, /*late=*/b < next, grad.view({-1}));
    } else {
      if (!r.flat.defined()) start(b, /*late=*/b < next);
      peak = std::max(peak, held + int64_t(grad.nbytes()));
      const int64_t at = bucket.offsets[j];
      r.flat.slice(0, at, at + grad.numel()).add_(grad.reshape({-1}));
    }
    grad.reset();
    if (!r.taken[j]) {
      r.taken[j] = true;
      if (++r.ready == r.taken.size() && on_complete) on_complete(b);
    }
    while (next < open.size() && open[next].flat.defined() && !open[next].late &&
           open[next].ready == open[next].taken.size())
      send(next++);
  }

  // Opens bucket b's round with a zero buffer, or with `flat` (the gradient that fills it alone).
  void start(size_t b, bool late, at::Tensor flat = at::Tensor()) {
    const ShardLayout::Bucket& bucket = layout.buckets[b];
    Round& r = open[b];
    r.bucket = b;
    r.late = late;
    r.flat = flat.defined() ? flat
                            : at::zeros({bucket.shard * layout.size}, params.front().tensor.options().requires_grad(false));
    r.taken.assign(bucket.params.size(), false);
    r.ready = 0;
    hold(r.flat);
  }

  void send(size_t b) {
    Round r = std::move(open[b]);
    open[b] = Round{};
    const ShardLayout::Bucket& bucket = layout.buckets[b];
    if (communicates()) {
      // A bucket's first round of the step is reduced straight into its slice of the shard
      // (nothing to add to yet); later rounds into a buffer that add_oldest() adds.
      r.into_shard = !reduced[b];
      reduced[b] = true;
      if (r.into_shard) {
        r.out = ensure_shard().slice(0, bucket.shard_offset, bucket.shard_offset + bucket.shard);
      } else {
        r.out = at::empty({bucket.shard}, r.flat.options());
        hold(r.out);
      }
      r.work = group->reduce_scatter_async(r.out, r.flat, dist::ReduceOp::kAvg);
    } else {
      r.out = r.flat;  // W = 1: the bucket is its own shard
    }
    sent.push_back(std::move(r));
    while (sent.size() > size_t(kInFlight)) add_oldest();
  }

  void add_oldest() {
    Round& r = sent.front();
    if (r.work) r.work->wait();
    const ShardLayout::Bucket& bucket = layout.buckets[r.bucket];
    if (!r.into_shard) ensure_shard().slice(0, bucket.shard_offset, bucket.shard_offset + bucket.shard).add_(r.out);
    held -= r.flat.nbytes() + (r.into_shard || r.out.is_same(r.flat) ? 0 : r.out.nbytes());
    sent.pop_front();
  }

  // Zero where no bucket has been reduced yet (a bucket without gradients adds nothing).
  at::Tensor& ensure_shard() {
    if (!shard.defined()) {
      shard = at::zeros({layout.shard}, params.front().tensor.options().requires_grad(false));
      hold(shard);
    }
    return shard;
  }

  void hold(const at::Tensor& t) {
    held += t.nbytes();
    peak = std::max(peak, held);
  }

  // Ends the pass: the rest of this pass's buckets, then its late rounds, all in bucket order.
  void end_pass() {
    for (size_t b = next; b < open.size(); ++b)
      if (open[b].flat.defined() && !open[b].late) send(b);
    for (size_t b = 0; b < open.size(); ++b)
      if (open[b].flat.defined()) send(b);
    next = 0;
  }

  // Everything still outside the shard: gradients not yet taken (from the last
  // parameter to the first, the buckets' order), open buckets, sent ones.
  void flush() {
    for (size_t k = params.size(); k-- > 0;) take(k);
    end_pass();
    while (!sent.empty()) add_oldest();
  }
};

GradReduceScatter::GradReduceScatter(const ParamSet& params, ShardLayout layout, dist::CommPtr group,
                                     bool streaming)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  const int size = group ? group->size() : 1, rank = group ? group->rank() : 0;
  HPCRL_CHECK(layout.size == size && layout.rank == rank, "shard layout for rank " << layout.rank << " of "
              << layout.size << " used on rank " << rank << " of a group of " << size);
  s.params = params;
  s.layout = std::move(layout);
  s.group = std::move(group);
  s.place.resize(params.size());
  for (size_t b = 0; b < s.layout.buckets.size(); ++b)
    for (size_t j = 0; j < s.layout.buckets[b].params.size(); ++j) s.place[s.layout.buckets[b].params[j]] = {b, j};
  s.open.resize(s.layout.buckets.size());
  s.reduced.assign(s.layout.buckets.size(), false);
  if (!streaming) return;
  // Runs after AccumulateGrad has stored this micro-batch's gradient in param.grad.
  hooks_ = std::make_unique<AccumulatorHooks>(params, [state = state_](size_t k) {
    std::lock_guard<std::mutex> lock(state->mu);
    torch::NoGradGuard no_grad;
    state->take(k);
  });
}

GradReduceScatter::~GradReduceScatter() {
  hooks_.reset();
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& r : state_->sent)
    if (r.work) r.work->wait();  // the communication thread must not outlive the buffers it writes
}

void GradReduceScatter::begin_micro_batch() {
  std::lock_guard<std::mutex> lock(state_->mu);
  torch::NoGradGuard no_grad;
  state_->end_pass();
}

at::Tensor GradReduceScatter::finish() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  torch::NoGradGuard no_grad;
  if (s.params.empty()) return at::Tensor();
  s.flush();
  at::Tensor shard = s.shard.defined() ? s.shard : at::zeros({s.layout.shard}, s.params.front().tensor.options()
                                                                                     .requires_grad(false));
  if (s.shard.defined()) s.held -= s.shard.nbytes();
  s.shard = at::Tensor();
  s.reduced.assign(s.reduced.size(), false);
  return shard;
}

void GradReduceScatter::on_bucket_complete(std::function<void(size_t)> fn) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->on_complete = std::move(fn);
}

const ShardLayout& GradReduceScatter::layout() const { return state_->layout; }

int64_t GradReduceScatter::peak_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->peak;
}

}  // namespace hpcrl::optim
