// Installs trace's CUDA-event span timer for a CUDA run (span_device_timing.h).
#include "hpcrl/runner/span_device_timing.h"

#ifdef HPCRL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace hpcrl::runner {

SpanDeviceTiming::SpanDeviceTiming(bool cuda) {
#ifdef HPCRL_TORCH_CUDA
  if (!cuda) return;
  // The stream is asked for at every marker: code that switches streams is timed on its own.
  timer_ = trace::make_cuda_device_timer([] { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); });
  trace::set_device_timer(timer_.get());
#else
  (void)cuda;  // a CPU-only build refuses run.device cuda when it binds the device
#endif
}

SpanDeviceTiming::~SpanDeviceTiming() {
  if (timer_) trace::set_device_timer(nullptr);
}

}  // namespace hpcrl::runner
