// MPI collectives and point-to-point on contiguous CPU tensors.
// bfloat16/float16 reductions are done in float32 (one conversion in, one
// rounding out), so a sum of N half-precision values is the correctly rounded
// float32 sum rather than N-1 successive half-precision roundings.
// Element counts above INT_MAX (MPI's count type) are split into chunks for
// all_reduce and broadcast (flattened gradient buckets can get there);
// reduce_scatter goes in slices of 8 MiB per rank (below); elsewhere such
// counts are an error.
#include "distributed/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <mutex>

#include "distributed/mpi/mpi_types.h"
#include "hpcrl/util/check.h"

namespace hpcrl::dist {
namespace {

constexpr int64_t kMaxChunk = INT_MAX;

// Open MPI 4.1 reduces a reduce_scatter_block in small groups "basic linear":
// the whole input is reduced onto rank 0 and then scattered, so rank 0 alone
// holds a temporary as large as the input (measured: ZeRO-1 at dp 2 on
// base-100m, rank 0 peaked 385 MiB, one full fp32 gradient, above rank 1;
// docs/zero.md). Reducing in slices of at most this many bytes of each rank's
// part bounds that temporary, and the copy each slice needs, to a bucket.
constexpr int64_t kReduceScatterSliceBytes = 8 << 20;

int to_count(int64_t n, const char* what, const std::string& group) {
  HPCRL_CHECK(n <= INT_MAX, what << " on group '" << group << "' moves " << n
                                 << " elements in one message, more than MPI's int count allows; "
                                    "split the tensor");
  return static_cast<int>(n);
}

// A posted MPI_Isend/MPI_Irecv. The mutex serialises MPI_Test/MPI_Wait on the
// request when several threads poll the same handle.
class RequestWork : public Work {
 public:
  RequestWork(MPI_Request req, at::Tensor keep_alive, bool is_recv, int peer, int tag, std::string group)
      : req_(req), tensor_(std::move(keep_alive)), is_recv_(is_recv), peer_(peer), tag_(tag), group_(std::move(group)) {}

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    MPI_Status status;
    mpi::check(MPI_Wait(&req_, &status), "MPI_Wait", group_);
    complete(status);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    mpi::check(MPI_Test(&req_, &flag, &status), "MPI_Test", group_);
    if (flag) complete(status);
    return done_;
  }

 private:
  void complete(const MPI_Status& status) {
    done_ = true;
    if (!is_recv_) return;
    int got = 0;
    MPI_Get_count(&status, mpi::move_type(tensor_.scalar_type()), &got);
    HPCRL_CHECK(got == tensor_.numel(),
                "recv from rank " << peer_ << " (tag " << tag_ << ") on group '" << group_ << "': received " << got
                                  << " elements, expected " << tensor_.numel() << " (shape " << tensor_.sizes()
                                  << "); sender and receiver disagree on the shape");
  }

  std::mutex mu_;
  MPI_Request req_;
  at::Tensor tensor_;
  bool is_recv_;
  int peer_, tag_;
  std::string group_;
  bool done_ = false;
};

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiBackend::~MpiBackend() {
  thread_.drain();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void MpiBackend::divide_for_avg(at::Tensor& t) const {
  if (at::isFloatingType(t.scalar_type()))
    t.div_(size_);
  else
    t.div_(size_, "trunc");  // integers average with truncation, like NCCL's ncclAvg
}

void MpiBackend::all_reduce(at::Tensor& t, ReduceOp op) {
  if (mpi::reduces_in_fp32(t.scalar_type())) {
    at::Tensor f = t.to(at::kFloat);
    all_reduce(f, op);
    t.copy_(f);
    return;
  }
  MPI_Datatype type = mpi::reduce_type(t.scalar_type());
  char* data = static_cast<char*>(t.data_ptr());
  for (int64_t off = 0; off < t.numel(); off += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, t.numel() - off));
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, data + off * t.element_size(), n, type, mpi::mpi_op(op), comm_),
               "MPI_Allreduce", name_);
  }
  if (op == ReduceOp::kAvg) divide_for_avg(t);
}

void MpiBackend::all_gather(const at::Tensor& in, at::Tensor& out) {
  MPI_Datatype type = mpi::move_type(in.scalar_type());
  int n = to_count(in.numel(), "all_gather", name_);
  mpi::check(MPI_Allgather(in.data_ptr(), n, type, out.data_ptr(), n, type, comm_), "MPI_Allgather", name_);
}

void MpiBackend::reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) {
  if (mpi::reduces_in_fp32(in.scalar_type())) {
    at::Tensor fin = in.to(at::kFloat);
    at::Tensor fout = at::empty({out.numel()}, fin.options());
    reduce_scatter(fin, fout, op);
    out.copy_(fout.view(out.sizes()));
    return;
  }
  MPI_Datatype type = mpi::reduce_type(in.scalar_type());
  const int64_t part = out.numel(), slice = std::max<int64_t>(1, kReduceScatterSliceBytes / in.element_size());
  if (part <= slice) {
    int n = to_count(part, "reduce_scatter", name_);
    mpi::check(MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(), n, type, mpi::mpi_op(op), comm_),
               "MPI_Reduce_scatter_block", name_);
  } else {
    HPCRL_CHECK(out.is_contiguous(), "reduce_scatter on group '" << name_ << "' into a non-contiguous tensor");
    const at::Tensor by_rank = in.reshape({size_, part});  // row r: what rank r receives the sum of
    for (int64_t off = 0; off < part; off += slice) {
      const int n = static_cast<int>(std::min(slice, part - off));
      const at::Tensor piece = by_rank.narrow(1, off, n).contiguous();  // [size, n]
      mpi::check(MPI_Reduce_scatter_block(piece.data_ptr(), static_cast<char*>(out.data_ptr()) + off * out.element_size(),
                                          n, type, mpi::mpi_op(op), comm_),
                 "MPI_Reduce_scatter_block", name_);
    }
  }
  if (op == ReduceOp::kAvg) divide_for_avg(out);
}

void MpiBackend::broadcast(at::Tensor& t, int root) {
  MPI_Datatype type = mpi::move_type(t.scalar_type());
  char* data = static_cast<char*>(t.data_ptr());
  for (int64_t off = 0; off < t.numel(); off += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, t.numel() - off));
    mpi::check(MPI_Bcast(data + off * t.element_size(), n, type, root, comm_), "MPI_Bcast", name_);
  }
}

void MpiBackend::all_to_all(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& send_elems,
                            const std::vector<int64_t>& recv_elems) {
  MPI_Datatype type = mpi::move_type(in.scalar_type());
  // Always MPI_Alltoallv: choosing MPI_Alltoall when this rank's counts happen to
  // be equal would pair it with another rank's MPI_Alltoallv (unequal counts
  // there) and hang — every rank of a collective must make the same call.
  std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
  int64_t soff = 0, roff = 0;
  for (int i = 0; i < size_; ++i) {
    sc[i] = to_count(send_elems[i], "all_to_all", name_);
    rc[i] = to_count(recv_elems[i], "all_to_all", name_);
    sd[i] = to_count(soff, "all_to_all (displacement)", name_);
    rd[i] = to_count(roff, "all_to_all (displacement)", name_);
    soff += send_elems[i];
    roff += recv_elems[i];
  }
  mpi::check(MPI_Alltoallv(in.data_ptr(), sc.data(), sd.data(), type, out.data_ptr(), rc.data(), rd.data(), type,
                           comm_),
             "MPI_Alltoallv", name_);
}

void MpiBackend::send(const at::Tensor& t, int peer, int tag) {
  int n = to_count(t.numel(), "send", name_);
  mpi::check(MPI_Send(t.data_ptr(), n, mpi::move_type(t.scalar_type()), peer, tag, comm_), "MPI_Send", name_);
}

void MpiBackend::recv(at::Tensor& t, int peer, int tag) {
  int n = to_count(t.numel(), "recv", name_);
  MPI_Datatype type = mpi::move_type(t.scalar_type());
  MPI_Status status;
  mpi::check(MPI_Recv(t.data_ptr(), n, type, peer, tag, comm_, &status), "MPI_Recv", name_);
  int got = 0;
  MPI_Get_count(&status, type, &got);
  HPCRL_CHECK(got == n, "recv from rank " << peer << " (tag " << tag << ") on group '" << name_ << "': received "
                                          << got << " elements, expected " << n << " (shape " << t.sizes()
                                          << "); sender and receiver disagree on the shape");
}

void MpiBackend::barrier() { mpi::check(MPI_Barrier(comm_), "MPI_Barrier", name_); }

WorkPtr MpiBackend::run_async(std::function<void()> op, const std::vector<at::Tensor>& /*in_use*/) {
  return thread_.submit(std::move(op));  // `op` holds its tensors alive itself
}

WorkPtr MpiBackend::send_async(const at::Tensor& t, int peer, int tag) {
  int n = to_count(t.numel(), "send", name_);
  MPI_Request req;
  mpi::check(MPI_Isend(t.data_ptr(), n, mpi::move_type(t.scalar_type()), peer, tag, comm_, &req), "MPI_Isend",
             name_);
  return std::make_shared<RequestWork>(req, t, /*is_recv=*/false, peer, tag, name_);
}

WorkPtr MpiBackend::recv_async(const at::Tensor& t, int peer, int tag) {
  int n = to_count(t.numel(), "recv", name_);
  MPI_Request req;
  mpi::check(MPI_Irecv(t.data_ptr(), n, mpi::move_type(t.scalar_type()), peer, tag, comm_, &req), "MPI_Irecv",
             name_);
  return std::make_shared<RequestWork>(req, t, /*is_recv=*/true, peer, tag, name_);
}

void MpiBackend::drain() { thread_.drain(); }

}  // namespace hpcrl::dist
