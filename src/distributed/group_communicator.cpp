// Tensor layout and tracing shared by the MPI and NCCL transports (see
// group_communicator.h); the collectives' argument checks and their one-rank
// results are Communicator's (communicator.cpp). Collectives change no shapes
// in place; outputs are allocated here, on the input's device, contiguous.
#include "distributed/group_communicator.h"

#include <atomic>

#include "hpcrl/distributed/watchdog.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

#ifdef HPCRL_WITH_NCCL
#include "distributed/nccl/nccl_backend.h"
#endif

namespace hpcrl::dist {
namespace {

// Runs `f` under the watchdog's eye and, when communication tracing is on, records it.
template <class F>
void traced(const char* op, const std::string& group, const std::vector<int>& ranks, int64_t bytes, F&& f) {
  WatchedCall watch(op, group, ranks);
  if (!trace::comm_enabled()) {
    f();
    return;
  }
  double t0 = trace::now_us();
  f();
  trace::comm(op, group, bytes, t0, trace::now_us() - t0);
}

// Records a p2p async operation when its completion is first observed.
class TracedWork : public Work {
 public:
  TracedWork(WorkPtr inner, const char* op, std::string group, const std::vector<int>& ranks, int64_t bytes,
             double start_us)
      : inner_(std::move(inner)), op_(op), group_(std::move(group)), ranks_(ranks), bytes_(bytes), start_us_(start_us) {}
  void wait() override {
    {
      WatchedCall watch(op_, group_, ranks_);
      inner_->wait();
    }
    record();
  }
  bool is_completed() override {
    if (!inner_->is_completed()) return false;
    record();
    return true;
  }

 private:
  void record() {
    if (recorded_.exchange(true) || !trace::comm_enabled()) return;
    trace::comm(op_, group_, bytes_, start_us_, trace::now_us() - start_us_);
  }
  WorkPtr inner_;
  const char* op_;
  std::string group_;
  const std::vector<int>& ranks_;  // the communicator's, which outlives its requests
  int64_t bytes_;
  double start_us_;
  std::atomic<bool> recorded_{false};
};

void check_async_tensor(const at::Tensor& t, const char* op) {
  HPCRL_CHECK(t.is_contiguous(), op << " needs a contiguous tensor (shape " << t.sizes() << ", strides "
                                    << t.strides() << "); pass t.contiguous() and keep it until wait()");
}

}  // namespace

GroupCommunicator::GroupCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks)
    : name_(std::move(name)), world_ranks_(std::move(world_ranks)), mpi_(comm, name_) {
  HPCRL_CHECK(static_cast<int>(world_ranks_.size()) == mpi_.size(),
              "group '" << name_ << "' lists " << world_ranks_.size() << " ranks but its MPI communicator has "
                        << mpi_.size());
}

Backend& GroupCommunicator::backend_for(const at::Tensor& t) {
  if (t.device().is_cpu()) return mpi_;
  HPCRL_CHECK(t.is_cuda(), "group '" << name_ << "': tensors on " << t.device()
                                     << " are not supported; use CPU (MPI) or CUDA (NCCL) tensors");
#ifdef HPCRL_WITH_NCCL
  std::lock_guard<std::mutex> lock(nccl_mu_);
  if (!nccl_) {
    mpi_.drain();  // the NCCL id goes over this group's MPI communicator: keep its call order
    nccl_ = std::make_unique<NcclBackend>(mpi_.comm(), t.device().index(), name_);
  }
  return *nccl_;
#else
  HPCRL_CHECK(false, "group '" << name_ << "': a CUDA tensor was passed but this hpcrl was built without NCCL; "
                               "rebuild with the CUDA Toolkit's NCCL available (HPCRL_WITH_NCCL)");
#endif
}

void GroupCommunicator::check_peer(int peer, int tag, const char* op) const {
  HPCRL_CHECK(peer >= 0 && peer < size() && peer != rank(),
              op << " on group '" << name_ << "': peer " << peer << " must be another rank of the group (size "
                 << size() << ", this rank " << rank() << ")");
  HPCRL_CHECK(tag >= 0 && tag <= 32767, op << ": tag " << tag << " must be in [0, 32767] (MPI's guaranteed range)");
}

void GroupCommunicator::do_all_reduce(at::Tensor& t, ReduceOp op) {
  Backend& b = backend_for(t);
  b.drain();
  traced("all_reduce", name_, world_ranks_, t.nbytes(), [&] {
    if (t.is_contiguous()) {
      b.all_reduce(t, op);
    } else {
      at::Tensor buf = t.contiguous();
      b.all_reduce(buf, op);
      t.copy_(buf);
    }
  });
}

at::Tensor GroupCommunicator::do_all_gather(const at::Tensor& t, int64_t d) {
  Backend& b = backend_for(t);
  b.drain();
  at::Tensor in = t.contiguous();
  std::vector<int64_t> stacked{size()};
  stacked.insert(stacked.end(), t.sizes().begin(), t.sizes().end());
  at::Tensor out = at::empty(stacked, t.options());  // [size, *t.shape]
  traced("all_gather", name_, world_ranks_, out.nbytes(), [&] { b.all_gather(in, out); });
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[d] *= size();
  // [size, ..., t_d, ...] -> [..., size, t_d, ...] -> [..., size·t_d, ...]: rank-major along dim.
  return d == 0 ? out.view(shape) : out.movedim(0, d).reshape(shape);
}

at::Tensor GroupCommunicator::do_reduce_scatter(const at::Tensor& t, ReduceOp op, int64_t d) {
  Backend& b = backend_for(t);
  b.drain();
  at::Tensor in = d == 0 ? t.contiguous() : t.movedim(d, 0).contiguous();  // [t_d, ...rest]
  std::vector<int64_t> shape(in.sizes().begin(), in.sizes().end());
  shape[0] /= size();
  at::Tensor out = at::empty(shape, t.options());  // [t_d / size, ...rest]
  traced("reduce_scatter", name_, world_ranks_, in.nbytes(), [&] { b.reduce_scatter(in, out, op); });
  return d == 0 ? out : out.movedim(0, d).contiguous();
}

void GroupCommunicator::do_all_gather_into(at::Tensor& out, const at::Tensor& t) {
  Backend& b = backend_for(t);
  b.drain();
  at::Tensor in = t.contiguous();
  traced("all_gather", name_, world_ranks_, out.nbytes(), [&] { b.all_gather(in, out); });
}

void GroupCommunicator::do_reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op) {
  Backend& b = backend_for(t);
  b.drain();
  at::Tensor in = t.contiguous();
  traced("reduce_scatter", name_, world_ranks_, in.nbytes(), [&] { b.reduce_scatter(in, out, op); });
}

void GroupCommunicator::do_broadcast(at::Tensor& t, int root) {
  Backend& b = backend_for(t);
  b.drain();
  traced("broadcast", name_, world_ranks_, t.nbytes(), [&] {
    if (t.is_contiguous()) {
      b.broadcast(t, root);
    } else {
      at::Tensor buf = t.contiguous();
      b.broadcast(buf, root);
      t.copy_(buf);
    }
  });
}

at::Tensor GroupCommunicator::do_all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_rows,
                                            const std::vector<int64_t>& recv_rows) {
  Backend& b = backend_for(t);
  b.drain();
  int64_t row_elems = 1;
  for (int64_t i = 1; i < t.dim(); ++i) row_elems *= t.size(i);
  std::vector<int64_t> send_elems(size()), recv_elems(size());
  int64_t out_rows = 0;
  for (int i = 0; i < size(); ++i) {
    send_elems[i] = send_rows[i] * row_elems;
    recv_elems[i] = recv_rows[i] * row_elems;
    out_rows += recv_rows[i];
  }
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[0] = out_rows;
  at::Tensor in = t.contiguous();
  at::Tensor out = at::empty(shape, t.options());  // [sum(recv_rows), ...rest]
  traced("all_to_all", name_, world_ranks_, in.nbytes(), [&] { b.all_to_all(in, out, send_elems, recv_elems); });
  return out;
}

void GroupCommunicator::send(const at::Tensor& t, int peer, int tag) {
  check_peer(peer, tag, "send");
  Backend& b = backend_for(t);
  at::Tensor buf = t.contiguous();
  traced("send", name_, world_ranks_, buf.nbytes(), [&] { b.send(buf, peer, tag); });
}

void GroupCommunicator::recv(at::Tensor& t, int peer, int tag) {
  check_peer(peer, tag, "recv");
  Backend& b = backend_for(t);
  traced("recv", name_, world_ranks_, t.nbytes(), [&] {
    if (t.is_contiguous()) {
      b.recv(t, peer, tag);
    } else {
      at::Tensor buf = at::empty(t.sizes(), t.options());
      b.recv(buf, peer, tag);
      t.copy_(buf);
    }
  });
}

void GroupCommunicator::do_barrier() {
  mpi_.drain();
  traced("barrier", name_, world_ranks_, 0, [&] { mpi_.barrier(); });
}

WorkPtr GroupCommunicator::queued(const char* op, Backend& b, int64_t bytes, std::function<void()> call,
                                  const std::vector<at::Tensor>& in_use) {
  return b.run_async([op, &group = name_, &ranks = world_ranks_, bytes, call = std::move(call)] {
    traced(op, group, ranks, bytes, call);
  }, in_use);
}

WorkPtr GroupCommunicator::do_all_reduce_async(at::Tensor t, ReduceOp op) {
  Backend& b = backend_for(t);
  return queued("all_reduce", b, t.nbytes(), [&b, t, op]() mutable { b.all_reduce(t, op); }, {t});
}

WorkPtr GroupCommunicator::do_reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op) {
  Backend& b = backend_for(t);
  return queued("reduce_scatter", b, t.nbytes(), [&b, out, t, op]() mutable { b.reduce_scatter(t, out, op); },
                {out, t});
}

WorkPtr GroupCommunicator::do_all_gather_async(at::Tensor out, at::Tensor t) {
  Backend& b = backend_for(t);
  return queued("all_gather", b, out.nbytes(), [&b, out, t]() mutable { b.all_gather(t, out); }, {out, t});
}

WorkPtr GroupCommunicator::do_broadcast_async(at::Tensor t, int root) {
  Backend& b = backend_for(t);
  return queued("broadcast", b, t.nbytes(), [&b, t, root]() mutable { b.broadcast(t, root); }, {t});
}

WorkPtr GroupCommunicator::send_async(at::Tensor t, int peer, int tag) {
  check_peer(peer, tag, "send_async");
  check_async_tensor(t, "send_async");
  Backend& b = backend_for(t);
  double t0 = trace::comm_enabled() ? trace::now_us() : 0;
  return std::make_shared<TracedWork>(b.send_async(t, peer, tag), "send", name_, world_ranks_, t.nbytes(), t0);
}

WorkPtr GroupCommunicator::recv_async(at::Tensor t, int peer, int tag) {
  check_async_tensor(t, "recv_async");
  check_peer(peer, tag, "recv_async");
  Backend& b = backend_for(t);
  double t0 = trace::comm_enabled() ? trace::now_us() : 0;
  return std::make_shared<TracedWork>(b.recv_async(t, peer, tag), "recv", name_, world_ranks_, t.nbytes(), t0);
}

}  // namespace hpcrl::dist
