// The few places where the NCCL backend must agree with LibTorch's CUDA
// runtime: which stream is "current", where the communication stream comes
// from, and telling the caching allocator that a tensor is in use on that
// stream. With a CUDA LibTorch (HPCRL_TORCH_CUDA) these use c10's streams; with
// a CPU LibTorch (this build still compiles NCCL) they fall back to the CUDA
// runtime's default stream and a stream of our own, and there are no CUDA
// tensors to protect.
#pragma once

#ifdef HPCRL_WITH_NCCL

#include <ATen/ATen.h>
#include <cuda_runtime.h>

#include <string>

namespace hpcrl::dist::cuda {

// Throws RuntimeError "<what>: <cuda error string>" unless rc == cudaSuccess.
void check(cudaError_t rc, const std::string& what);

// The stream LibTorch's kernels are running on for `device`.
cudaStream_t current_stream(int device);
// A non-blocking stream for asynchronous communication on `device` (lives for the process).
cudaStream_t new_comm_stream(int device);
// Marks `t`'s memory as in use on `stream` so the caching allocator does not
// hand it out again before the work queued there has finished.
void record_stream(const at::Tensor& t, cudaStream_t stream);

// Sets the current CUDA device for its scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace hpcrl::dist::cuda

#endif  // HPCRL_WITH_NCCL
