// Device-side timing for trace spans. Kernels launched on a GPU return before
// they run, so a host clock around `loss.backward()` measures the launch, not
// the work. With a DeviceTimer installed, every span off the comm lane records a
// marker (a CUDA event) on the device stream at its start and end; the span's
// event is written once the device has passed the end marker, placed at
//   ts  = host time of the anchor + elapsed(anchor, start marker)
//   dur = elapsed(start marker, end marker)
// where the anchor is a marker recorded and waited for when the timer is
// installed. Device intervals on one stream nest exactly as the spans do.
//
// trace itself is device-agnostic (the interface below); the CUDA implementation
// exists only in CUDA builds (HPCRL_TORCH_CUDA). Elapsed times come back as
// float milliseconds from CUDA, so positions drift by ~6e-8 of the time since
// the anchor (0.2 ms after an hour); durations are exact to CUDA's ~0.5 µs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace hpcrl::trace {

class DeviceTimer {
 public:
  using Marker = uint64_t;
  virtual ~DeviceTimer() = default;
  // Enqueues a marker on the current device stream (does not block).
  virtual Marker record() = 0;
  // Whether the device has passed the marker (does not block).
  virtual bool ready(Marker m) = 0;
  // Blocks until the device has passed the marker.
  virtual void synchronize(Marker m) = 0;
  // Milliseconds from `a` to `b` on the device; both must be ready.
  virtual double elapsed_ms(Marker a, Marker b) = 0;
  // Returns the marker's resources (it is not used again).
  virtual void release(Marker m) = 0;
};

// Installs `timer` for every later span (nullptr uninstalls). The trace does not
// own it; it must outlive tracing or be uninstalled first. Installing waits for
// an anchor marker; uninstalling waits for every pending device-timed span and
// writes it. Thread-safe.
void set_device_timer(DeviceTimer* timer);

// While a CUDA graph is captured, the timer must leave the device alone: an event
// recorded on the capturing stream would become a node of the graph, and a query
// or wait during a capture invalidates it. Between pause_device_timer() and the
// matching resume_device_timer() the trace makes no DeviceTimer call at all:
//   - a span that begins is host-timed (no marker);
//   - a device-timed span that ends is written with its host start and end (its
//     start marker released, no end marker recorded);
//   - spans that ended before the pause wait, unqueried, until the resume.
// Pauses nest (a count) and apply to every thread; resume without a pause is a
// RuntimeError (a caller bug). set_device_timer() and trace::stop() wait on
// markers, so neither belongs inside a capture. Graph-capture code holds a
// DeviceTimerPause across the capture.
void pause_device_timer();
void resume_device_timer();
bool device_timer_paused();

class DeviceTimerPause {
 public:
  DeviceTimerPause() { pause_device_timer(); }
  ~DeviceTimerPause() { resume_device_timer(); }
  DeviceTimerPause(const DeviceTimerPause&) = delete;
  DeviceTimerPause& operator=(const DeviceTimerPause&) = delete;
};

#ifdef HPCRL_TORCH_CUDA
// CUDA events on the stream returned by `current_stream` (a cudaStream_t; the
// torch-aware caller passes c10::cuda::getCurrentCUDAStream()). Without one the
// legacy default stream is used, which is torch's default stream too.
std::unique_ptr<DeviceTimer> make_cuda_device_timer(std::function<void*()> current_stream = {});
#endif

}  // namespace hpcrl::trace
