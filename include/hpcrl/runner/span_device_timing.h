// Device-timed trace spans for a run on run.device cuda: while one of these
// lives, trace's CUDA-event timer (trace/device_timer.h) marks every span on
// torch's current CUDA stream of this rank's device, so a span's length is the
// GPU's time, not the kernel launches'. Destroying it uninstalls the timer
// (waiting for the spans still on the device). Graph-capture code holds a
// trace::DeviceTimerPause across a capture. On a CPU run, or without a CUDA
// LibTorch, it does nothing.
#pragma once

#include <memory>

#include "hpcrl/trace/device_timer.h"

namespace hpcrl::runner {

class SpanDeviceTiming {
 public:
  // Call after the rank's device is bound (dist::bind_device) and tracing started.
  explicit SpanDeviceTiming(bool cuda);
  ~SpanDeviceTiming();
  SpanDeviceTiming(const SpanDeviceTiming&) = delete;
  SpanDeviceTiming& operator=(const SpanDeviceTiming&) = delete;
  bool installed() const { return timer_ != nullptr; }

 private:
  std::unique_ptr<trace::DeviceTimer> timer_;
};

}  // namespace hpcrl::runner
