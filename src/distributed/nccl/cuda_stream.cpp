// CUDA stream glue for the NCCL backend (see cuda_stream.h). This is the only
// dist file that includes LibTorch's CUDA headers, and only under HPCRL_TORCH_CUDA.
#ifdef HPCRL_WITH_NCCL

#include "distributed/nccl/cuda_stream.h"

#ifdef HPCRL_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "hpcrl/util/error.h"

namespace hpcrl::dist::cuda {

void check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) throw RuntimeError(what + ": " + cudaGetErrorString(rc));
}

cudaStream_t current_stream(int device) {
#ifdef HPCRL_TORCH_CUDA
  return at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return nullptr;  // legacy default stream: without a CUDA LibTorch nothing else runs
#endif
}

cudaStream_t new_comm_stream(int device) {
#ifdef HPCRL_TORCH_CUDA
  return at::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device)).stream();
#else
  DeviceScope scope(device);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return stream;
#endif
}

void record_stream(const at::Tensor& t, cudaStream_t stream) {
#ifdef HPCRL_TORCH_CUDA
  if (!t.is_cuda()) return;
  auto s = c10::cuda::getStreamFromExternal(stream, t.device().index());
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), s);
#else
  (void)t;
  (void)stream;
#endif
}

DeviceScope::DeviceScope(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

DeviceScope::~DeviceScope() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

}  // namespace hpcrl::dist::cuda

#endif  // HPCRL_WITH_NCCL
