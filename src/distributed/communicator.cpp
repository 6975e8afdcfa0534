// The transport-independent half of every Communicator (see communicator.h):
// argument checks, and the result of each collective over a group of one rank,
// which needs no transport. Implementations (group_communicator.cpp) see only
// groups of two or more ranks and arguments already checked.
#include "hpcrl/distributed/communicator.h"

#include <numeric>

#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

int64_t wrap_dim(int64_t dim, const at::Tensor& t, const char* op) {
  HPCRL_CHECK(t.dim() >= 1, op << " needs a tensor with at least one dimension (got a scalar)");
  int64_t d = dim < 0 ? dim + t.dim() : dim;
  HPCRL_CHECK(d >= 0 && d < t.dim(), op << ": dim " << dim << " is out of range for shape " << t.sizes());
  return d;
}

void check_async_tensor(const at::Tensor& t, const char* op) {
  HPCRL_CHECK(t.is_contiguous(), op << " needs a contiguous tensor (shape " << t.sizes() << ", strides "
                                    << t.strides() << "); pass t.contiguous() and keep it until wait()");
}

// Over one rank every rank's block is this rank's own: out gets t's elements.
void copy_into(at::Tensor& out, const at::Tensor& t) { out.view({-1}).copy_(t.reshape({-1})); }

class CompletedWork : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

WorkPtr completed() { return std::make_shared<CompletedWork>(); }

// What a null CommPtr stands for: the base class answers every collective
// itself at size one, so the transport methods are never reached.
class OneRankCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  void send(const at::Tensor&, int peer, int) override { no_peer("send", peer); }
  void recv(at::Tensor&, int peer, int) override { no_peer("recv", peer); }
  WorkPtr send_async(at::Tensor, int peer, int) override { no_peer("send_async", peer); }
  WorkPtr recv_async(at::Tensor, int peer, int) override { no_peer("recv_async", peer); }

 protected:
  void do_all_reduce(at::Tensor&, ReduceOp) override { unreachable(); }
  at::Tensor do_all_gather(const at::Tensor&, int64_t) override { unreachable(); }
  at::Tensor do_reduce_scatter(const at::Tensor&, ReduceOp, int64_t) override { unreachable(); }
  void do_all_gather_into(at::Tensor&, const at::Tensor&) override { unreachable(); }
  void do_reduce_scatter_into(at::Tensor&, const at::Tensor&, ReduceOp) override { unreachable(); }
  void do_broadcast(at::Tensor&, int) override { unreachable(); }
  at::Tensor do_all_to_all(const at::Tensor&, const std::vector<int64_t>&, const std::vector<int64_t>&) override {
    unreachable();
  }
  void do_barrier() override { unreachable(); }
  WorkPtr do_all_reduce_async(at::Tensor, ReduceOp) override { unreachable(); }
  WorkPtr do_reduce_scatter_async(at::Tensor, at::Tensor, ReduceOp) override { unreachable(); }
  WorkPtr do_all_gather_async(at::Tensor, at::Tensor) override { unreachable(); }
  WorkPtr do_broadcast_async(at::Tensor, int) override { unreachable(); }

 private:
  [[noreturn]] static void no_peer(const char* op, int peer) {
    throw RuntimeError(std::string(op) + " to peer " + std::to_string(peer) +
                       " without a group (a null communicator): a group of one rank has no other rank");
  }
  [[noreturn]] static void unreachable() {
    throw RuntimeError("a collective over one rank reached a transport; Communicator answers it itself");
  }
  std::string name_ = "(one rank)";
  std::vector<int> ranks_;
};

Communicator& or_one_rank(const CommPtr& comm) {
  static OneRankCommunicator one_rank;
  return comm ? *comm : one_rank;
}

}  // namespace

void Communicator::check_into(const at::Tensor& out, const at::Tensor& t, int64_t out_elems, const char* op) const {
  HPCRL_CHECK(out.is_contiguous() && out.numel() == out_elems && out.scalar_type() == t.scalar_type() &&
                  out.device() == t.device(),
              op << " on group '" << name() << "': out must be a contiguous " << t.scalar_type() << " tensor of "
                 << out_elems << " elements on " << t.device() << " (got " << out.scalar_type() << " "
                 << out.sizes() << " on " << out.device() << (out.is_contiguous() ? "" : ", not contiguous") << ")");
}

void Communicator::check_divisible(int64_t n, const char* what, const char* op) const {
  HPCRL_CHECK(n % size() == 0, op << " on group '" << name() << "': " << n << " " << what
                                  << " are not divisible by the group size " << size());
}

void Communicator::check_root(int root, const char* op) const {
  HPCRL_CHECK(root >= 0 && root < size(), op << " on group '" << name() << "': root " << root
                                             << " is not a rank of the group (size " << size() << ")");
}

void Communicator::all_reduce(at::Tensor& t, ReduceOp op) {
  if (size() == 1) return;  // the sum, mean, max or min of one tensor is that tensor
  do_all_reduce(t, op);
}

at::Tensor Communicator::all_gather(const at::Tensor& t, int64_t dim) {
  const int64_t d = wrap_dim(dim, t, "all_gather");
  if (size() == 1) return t.contiguous();  // shape[d] · 1 = shape[d]
  return do_all_gather(t, d);
}

at::Tensor Communicator::reduce_scatter(const at::Tensor& t, ReduceOp op, int64_t dim) {
  const int64_t d = wrap_dim(dim, t, "reduce_scatter");
  HPCRL_CHECK(t.size(d) % size() == 0, "reduce_scatter on group '" << name() << "': dim " << d << " of shape "
                                                                   << t.sizes() << " is not divisible by the group size "
                                                                   << size());
  if (size() == 1) return t.contiguous();  // the whole reduction is this rank's one chunk
  return do_reduce_scatter(t, op, d);
}

void Communicator::all_gather_into(at::Tensor& out, const at::Tensor& t) {
  check_into(out, t, t.numel() * size(), "all_gather_into");
  if (size() == 1) return copy_into(out, t);
  do_all_gather_into(out, t);
}

void Communicator::reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op) {
  check_divisible(t.numel(), "elements", "reduce_scatter_into");
  check_into(out, t, t.numel() / size(), "reduce_scatter_into");
  if (size() == 1) return copy_into(out, t);
  do_reduce_scatter_into(out, t, op);
}

void Communicator::broadcast(at::Tensor& t, int root) {
  check_root(root, "broadcast");
  if (size() == 1) return;  // the root is this rank
  do_broadcast(t, root);
}

at::Tensor Communicator::all_to_all(const at::Tensor& t) {
  HPCRL_CHECK(t.dim() >= 1, "all_to_all needs a tensor with at least one dimension (got a scalar)");
  check_divisible(t.size(0), "rows along dim 0", "all_to_all");
  if (size() == 1) return t.contiguous();  // chunk 0 goes to, and comes from, this rank
  std::vector<int64_t> rows(size(), t.size(0) / size());
  return do_all_to_all(t, rows, rows);
}

at::Tensor Communicator::all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& recv_counts) {
  HPCRL_CHECK(t.dim() >= 1, "all_to_all needs a tensor with at least one dimension (got a scalar)");
  HPCRL_CHECK(static_cast<int>(send_counts.size()) == size() && static_cast<int>(recv_counts.size()) == size(),
              "all_to_all on group '" << name() << "': " << send_counts.size() << " send counts and "
                                      << recv_counts.size() << " recv counts for a group of " << size());
  for (int i = 0; i < size(); ++i)
    HPCRL_CHECK(send_counts[i] >= 0 && recv_counts[i] >= 0, "all_to_all: negative split count for rank " << i);
  int64_t total = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  HPCRL_CHECK(total == t.size(0), "all_to_all on group '" << name() << "': send counts sum to " << total
                                                          << " rows but the tensor has " << t.size(0));
  if (size() == 1) {
    HPCRL_CHECK(recv_counts[0] == send_counts[0], "all_to_all on group '" << name() << "' of one rank: it receives "
                                                  << recv_counts[0] << " rows from itself but sends " << send_counts[0]);
    return t.contiguous();
  }
  return do_all_to_all(t, send_counts, recv_counts);
}

void Communicator::barrier() {
  if (size() == 1) return;
  do_barrier();
}

WorkPtr Communicator::all_reduce_async(at::Tensor t, ReduceOp op) {
  check_async_tensor(t, "all_reduce_async");
  if (size() == 1) return completed();
  return do_all_reduce_async(std::move(t), op);
}

WorkPtr Communicator::reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op) {
  check_async_tensor(t, "reduce_scatter_async");
  check_divisible(t.numel(), "elements", "reduce_scatter_async");
  check_into(out, t, t.numel() / size(), "reduce_scatter_async");
  if (size() == 1) {
    copy_into(out, t);
    return completed();
  }
  return do_reduce_scatter_async(std::move(out), std::move(t), op);
}

WorkPtr Communicator::all_gather_async(at::Tensor out, at::Tensor t) {
  check_async_tensor(t, "all_gather_async");
  check_async_tensor(out, "all_gather_async");
  check_into(out, t, t.numel() * size(), "all_gather_async");
  if (size() == 1) {
    copy_into(out, t);
    return completed();
  }
  return do_all_gather_async(std::move(out), std::move(t));
}

WorkPtr Communicator::broadcast_async(at::Tensor t, int root) {
  check_async_tensor(t, "broadcast_async");
  check_root(root, "broadcast_async");
  if (size() == 1) return completed();
  return do_broadcast_async(std::move(t), root);
}

void all_reduce(const CommPtr& comm, at::Tensor& t, ReduceOp op) { or_one_rank(comm).all_reduce(t, op); }

at::Tensor all_gather(const CommPtr& comm, const at::Tensor& t, int64_t dim) {
  return or_one_rank(comm).all_gather(t, dim);
}

at::Tensor reduce_scatter(const CommPtr& comm, const at::Tensor& t, ReduceOp op, int64_t dim) {
  return or_one_rank(comm).reduce_scatter(t, op, dim);
}

void broadcast(const CommPtr& comm, at::Tensor& t, int root) { or_one_rank(comm).broadcast(t, root); }

}  // namespace hpcrl::dist
