// The NCCL transport for CUDA tensors. One ncclComm_t per group, created the
// first time the group sees a CUDA tensor: rank 0 makes the ncclUniqueId and
// the group's MPI communicator broadcasts it. Blocking calls are enqueued on
// LibTorch's current stream (NCCL is asynchronous to the host either way);
// run_async() enqueues on a separate communication stream ordered after the
// current one, and its Work makes the current stream wait for it.
#pragma once

#ifdef HPCRL_WITH_NCCL

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

#include "distributed/backend.h"

namespace hpcrl::dist {

class NcclBackend : public Backend {
 public:
  // Collective over `mpi_comm` (the group's communicator; every member calls it).
  NcclBackend(MPI_Comm mpi_comm, int device, std::string name);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  int device() const { return device_; }

  void all_reduce(at::Tensor& t, ReduceOp op) override;
  void all_gather(const at::Tensor& in, at::Tensor& out) override;
  void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  void all_to_all(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& send_elems,
                  const std::vector<int64_t>& recv_elems) override;
  void send(const at::Tensor& t, int peer, int tag) override;
  void recv(at::Tensor& t, int peer, int tag) override;
  void barrier() override;

  WorkPtr run_async(std::function<void()> op, const std::vector<at::Tensor>& in_use) override;
  WorkPtr send_async(const at::Tensor& t, int peer, int tag) override;
  WorkPtr recv_async(const at::Tensor& t, int peer, int tag) override;
  void drain() override;

 private:
  cudaStream_t stream() const;
  void check(ncclResult_t rc, const char* call) const;

  ncclComm_t comm_ = nullptr;
  int device_ = 0, rank_ = 0, size_ = 1;
  std::string name_;
  cudaStream_t comm_stream_ = nullptr;
  bool on_comm_stream_ = false;          // inside run_async: enqueue on comm_stream_
  cudaEvent_t last_async_ = nullptr;     // end of the latest run_async, for drain()
  bool async_pending_ = false;
  void* barrier_buf_ = nullptr;          // one float for barrier()
};

}  // namespace hpcrl::dist

#endif  // HPCRL_WITH_NCCL
