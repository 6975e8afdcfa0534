// NCCL collectives and point-to-point on contiguous CUDA tensors. All-to-all
// and p2p are ncclSend/ncclRecv pairs inside ncclGroupStart/End (NCCL has no
// all-to-all primitive); NCCL ignores tags, so p2p messages between two ranks
// match in posting order. bfloat16/float16 are reduced by NCCL natively.
// Compiled whenever the CUDA Toolkit has NCCL; runs only where LibTorch has CUDA.
#ifdef HPCRL_WITH_NCCL

#include "distributed/nccl/nccl_backend.h"

#include "distributed/mpi/mpi_types.h"
#include "distributed/nccl/cuda_stream.h"
#include "hpcrl/util/check.h"

namespace hpcrl::dist {
namespace {

ncclDataType_t nccl_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kChar: return ncclInt8;
    case at::kByte:
    case at::kBool: return ncclUint8;
    default: break;
  }
  HPCRL_CHECK(false, "dtype " << dtype << " is not supported by the NCCL communicator; use float32, float64, "
                              "bfloat16, float16, int8/32/64 or uint8");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// Completion of work queued on the communication stream. wait() orders the
// caller's current stream after it (CUDA semantics: the host does not block).
class EventWork : public Work {
 public:
  EventWork(cudaEvent_t event, int device) : event_(event), device_(device) {}
  ~EventWork() override { cudaEventDestroy(event_); }
  void wait() override {
    cuda::DeviceScope scope(device_);
    cuda::check(cudaStreamWaitEvent(cuda::current_stream(device_), event_, 0), "cudaStreamWaitEvent");
  }
  bool is_completed() override { return cudaEventQuery(event_) == cudaSuccess; }

 private:
  cudaEvent_t event_;
  int device_;
};

}  // namespace

NcclBackend::NcclBackend(MPI_Comm mpi_comm, int device, std::string name) : device_(device), name_(std::move(name)) {
  MPI_Comm_rank(mpi_comm, &rank_);
  MPI_Comm_size(mpi_comm, &size_);
  ncclUniqueId id;
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mpi::check(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_comm), "MPI_Bcast(ncclUniqueId)", name_);
  cuda::DeviceScope scope(device_);
  check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  comm_stream_ = cuda::new_comm_stream(device_);
  cuda::check(cudaEventCreateWithFlags(&last_async_, cudaEventDisableTiming), "cudaEventCreate");
  cuda::check(cudaMalloc(&barrier_buf_, sizeof(float)), "cudaMalloc");
}

NcclBackend::~NcclBackend() {
  // The world communicator is a static that can outlive the CUDA runtime at
  // process exit ("driver shutting down"); the driver then reclaims the
  // communicator and its buffers itself, and a destructor must not throw.
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device_) != cudaSuccess) return;
  if (comm_) ncclCommDestroy(comm_);
  if (last_async_) cudaEventDestroy(last_async_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  cudaSetDevice(previous);
}

void NcclBackend::check(ncclResult_t rc, const char* call) const {
  if (rc == ncclSuccess) return;
  throw RuntimeError(std::string(call) + " on group '" + name_ + "' failed: " + ncclGetErrorString(rc));
}

cudaStream_t NcclBackend::stream() const { return on_comm_stream_ ? comm_stream_ : cuda::current_stream(device_); }

void NcclBackend::all_reduce(at::Tensor& t, ReduceOp op) {
  cuda::DeviceScope scope(device_);
  check(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op), comm_,
                      stream()),
        "ncclAllReduce");
}

void NcclBackend::all_gather(const at::Tensor& in, at::Tensor& out) {
  cuda::DeviceScope scope(device_);
  check(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.scalar_type()), comm_, stream()),
        "ncclAllGather");
}

void NcclBackend::reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) {
  cuda::DeviceScope scope(device_);
  check(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(in.scalar_type()), nccl_op(op),
                          comm_, stream()),
        "ncclReduceScatter");
}

void NcclBackend::broadcast(at::Tensor& t, int root) {
  cuda::DeviceScope scope(device_);
  check(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root, comm_, stream()),
        "ncclBroadcast");
}

void NcclBackend::all_to_all(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& send_elems,
                             const std::vector<int64_t>& recv_elems) {
  cuda::DeviceScope scope(device_);
  ncclDataType_t type = nccl_type(in.scalar_type());
  auto* src = static_cast<char*>(in.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t esize = in.element_size();
  int64_t soff = 0, roff = 0;
  cudaStream_t s = stream();
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    if (send_elems[peer] > 0) check(ncclSend(src + soff * esize, send_elems[peer], type, peer, comm_, s), "ncclSend");
    if (recv_elems[peer] > 0) check(ncclRecv(dst + roff * esize, recv_elems[peer], type, peer, comm_, s), "ncclRecv");
    soff += send_elems[peer];
    roff += recv_elems[peer];
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void NcclBackend::send(const at::Tensor& t, int peer, int /*tag*/) {
  cuda::DeviceScope scope(device_);
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclSend(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, comm_, stream()), "ncclSend");
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void NcclBackend::recv(at::Tensor& t, int peer, int /*tag*/) {
  cuda::DeviceScope scope(device_);
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclRecv(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, comm_, stream()), "ncclRecv");
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void NcclBackend::barrier() {
  // Every rank's previously queued work reaches this point before anyone leaves.
  cuda::DeviceScope scope(device_);
  check(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream()), "ncclAllReduce");
  cuda::check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

WorkPtr NcclBackend::run_async(std::function<void()> op, const std::vector<at::Tensor>& in_use) {
  cuda::DeviceScope scope(device_);
  for (const auto& t : in_use) cuda::record_stream(t, comm_stream_);
  cudaEvent_t ready = nullptr, done = nullptr;
  cuda::check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  cuda::check(cudaEventRecord(ready, cuda::current_stream(device_)), "cudaEventRecord");
  cuda::check(cudaStreamWaitEvent(comm_stream_, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);
  on_comm_stream_ = true;
  try {
    op();
  } catch (...) {
    on_comm_stream_ = false;
    throw;
  }
  on_comm_stream_ = false;
  cuda::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  cuda::check(cudaEventRecord(done, comm_stream_), "cudaEventRecord");
  cuda::check(cudaEventRecord(last_async_, comm_stream_), "cudaEventRecord");
  async_pending_ = true;
  return std::make_shared<EventWork>(done, device_);
}

WorkPtr NcclBackend::send_async(const at::Tensor& t, int peer, int tag) {
  return run_async([this, t, peer, tag] { send(t, peer, tag); }, {t});
}

WorkPtr NcclBackend::recv_async(const at::Tensor& t, int peer, int tag) {
  return run_async(
      [this, t, peer, tag] {
        at::Tensor out = t;
        recv(out, peer, tag);
      },
      {t});
}

void NcclBackend::drain() {
  if (!async_pending_) return;
  cuda::DeviceScope scope(device_);
  cuda::check(cudaStreamWaitEvent(cuda::current_stream(device_), last_async_, 0), "cudaStreamWaitEvent");
  async_pending_ = false;
}

}  // namespace hpcrl::dist

#endif  // HPCRL_WITH_NCCL
