// CUDA implementation of trace::DeviceTimer (device_timer.h): markers are
// pooled cudaEvent_t recorded on the caller's current stream, so a span's
// duration is what the GPU spent between its start and end, asynchronous
// kernels included. Compiled only in CUDA builds (HPCRL_TORCH_CUDA).
//
// Calls arrive under the trace writer's mutex, some from span destructors, so
// nothing here throws: a CUDA error is logged once and turns the elapsed time
// into NaN, which makes the trace drop that span instead of inventing a length.
#ifdef HPCRL_TORCH_CUDA

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <limits>
#include <vector>

#include "hpcrl/trace/device_timer.h"

namespace hpcrl::trace {
namespace {

class CudaDeviceTimer final : public DeviceTimer {
 public:
  explicit CudaDeviceTimer(std::function<void*()> current_stream) : current_stream_(std::move(current_stream)) {}

  ~CudaDeviceTimer() override {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
  }

  Marker record() override {
    Marker m;
    if (!free_.empty()) {
      m = free_.back();
      free_.pop_back();
    } else {
      cudaEvent_t e = nullptr;
      if (!ok(cudaEventCreate(&e), "cudaEventCreate")) e = nullptr;
      events_.push_back(e);
      m = events_.size();  // markers are 1-based slots
    }
    cudaStream_t stream = current_stream_ ? static_cast<cudaStream_t>(current_stream_()) : nullptr;
    if (event(m)) ok(cudaEventRecord(event(m), stream), "cudaEventRecord");
    return m;
  }

  bool ready(Marker m) override {
    if (!event(m)) return true;
    cudaError_t err = cudaEventQuery(event(m));
    if (err == cudaErrorNotReady) return false;
    ok(err, "cudaEventQuery");
    return true;
  }

  void synchronize(Marker m) override {
    if (event(m)) ok(cudaEventSynchronize(event(m)), "cudaEventSynchronize");
  }

  double elapsed_ms(Marker a, Marker b) override {
    float ms = 0;
    if (!event(a) || !event(b) || !ok(cudaEventElapsedTime(&ms, event(a), event(b)), "cudaEventElapsedTime"))
      return std::numeric_limits<double>::quiet_NaN();
    return ms;
  }

  void release(Marker m) override {
    if (m >= 1 && m <= events_.size()) free_.push_back(m);
  }

 private:
  cudaEvent_t event(Marker m) const { return m >= 1 && m <= events_.size() ? events_[m - 1] : nullptr; }

  bool ok(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return true;
    cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
    if (!warned_) {
      spdlog::error("trace: {} failed: {}; device-timed spans hit by it are left out of the trace", what,
                    cudaGetErrorString(err));
      warned_ = true;
    }
    return false;
  }

  std::function<void*()> current_stream_;
  std::vector<cudaEvent_t> events_;
  std::vector<Marker> free_;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<DeviceTimer> make_cuda_device_timer(std::function<void*()> current_stream) {
  return std::make_unique<CudaDeviceTimer>(std::move(current_stream));
}

}  // namespace hpcrl::trace

#endif  // HPCRL_TORCH_CUDA
