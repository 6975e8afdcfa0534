// Device-timed spans, with a simulated device standing in for CUDA (the CUDA
// timer itself needs a GPU). The simulated device has its own clock that the
// test advances, and markers become "ready" only when the test says the device
// got there — the two ways a GPU differs from the host clock. A span's duration
// must come from the device clock, its event must wait until the device has
// finished, and every marker must be released.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "hpcrl/trace/device_timer.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

class FakeDevice : public trace::DeviceTimer {
 public:
  double clock_ms = 0;         // the device's time "now" (when a marker is enqueued)
  double completed_ms = -1;    // the device has executed everything enqueued up to this time
  std::map<Marker, double> live;  // marker -> device time it was recorded at
  Marker next = 1;
  int synchronized = 0;

  Marker record() override {
    live[next] = clock_ms;
    return next++;
  }
  bool ready(Marker m) override { return live.at(m) <= completed_ms; }
  void synchronize(Marker m) override {
    ++synchronized;
    completed_ms = std::max(completed_ms, live.at(m));
  }
  double elapsed_ms(Marker a, Marker b) override { return live.at(b) - live.at(a); }
  void release(Marker m) override { live.erase(m); }
};

const nlohmann::json* find_x(const nlohmann::json& events, const std::string& name) {
  for (const auto& e : events)
    if (e["ph"] == "X" && e["name"] == name) return &e;
  return nullptr;
}

}  // namespace

TEST(DeviceTimer, SpanDurationComesFromDeviceAndWaitsForIt) {
  TempDir dir("device");
  FakeDevice device;
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);  // anchor at device time 0, waited for
  EXPECT_EQ(device.synchronized, 1);
  std::string path = trace::file_path();
  device.clock_ms = 10;
  {
    trace::ScopedSpan step("sft/step");
    device.clock_ms = 12;
    { trace::ScopedSpan fwd("sft/step/forward"); device.clock_ms = 20; }
    device.clock_ms = 35;  // kernels enqueued; the host returns at once
  }
  trace::flush();
  for (const auto& e : trace::parse_trace(read_text(path), path).events)
    EXPECT_NE(e.ph, "X") << "written before the device finished: " << e.name;

  device.completed_ms = 20;  // forward done, step still running on the device
  trace::flush();
  auto written = trace::parse_trace(read_text(path), path).events;
  int x_events = 0;
  for (const auto& e : written) x_events += e.ph == "X";
  EXPECT_EQ(x_events, 1);

  device.completed_ms = 35;
  trace::comm("all_reduce", "world", 64, trace::now_us(), 5);  // comm lane: host-timed, written directly
  trace::stop();
  auto events = nlohmann::json::parse(read_text(dir.str() + "/rank-00000.json"));
  const auto* step = find_x(events, "sft/step");
  const auto* fwd = find_x(events, "sft/step/forward");
  ASSERT_TRUE(step && fwd);
  EXPECT_DOUBLE_EQ((*step)["dur"].get<double>(), 25000.0);  // device 10 ms -> 35 ms
  EXPECT_DOUBLE_EQ((*fwd)["dur"].get<double>(), 8000.0);    // device 12 ms -> 20 ms
  // Placed by device time relative to the anchor: forward starts 2 ms after step.
  EXPECT_NEAR((*fwd)["ts"].get<double>() - (*step)["ts"].get<double>(), 2000.0, 1e-3);
  const auto* ar = find_x(events, "all_reduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_DOUBLE_EQ((*ar)["dur"].get<double>(), 5.0);

  trace::set_device_timer(nullptr);
  EXPECT_TRUE(device.live.empty()) << device.live.size() << " markers never released";
}

TEST(DeviceTimer, UninstallWaitsForPendingSpansAndWritesThem) {
  TempDir dir("device_uninstall");
  FakeDevice device;
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);
  device.clock_ms = 1;
  { trace::ScopedSpan s("rollout"); device.clock_ms = 4; }
  trace::set_device_timer(nullptr);  // synchronises the span's end marker
  EXPECT_TRUE(device.live.empty());
  { trace::ScopedSpan s("host"); }   // host-timed again
  trace::stop();
  auto events = nlohmann::json::parse(read_text(dir.str() + "/rank-00000.json"));
  ASSERT_NE(find_x(events, "rollout"), nullptr);
  EXPECT_DOUBLE_EQ((*find_x(events, "rollout"))["dur"].get<double>(), 3000.0);
  EXPECT_NE(find_x(events, "host"), nullptr);
}

TEST(DeviceTimer, DeviceErrorDropsTheSpanInsteadOfInventingALength) {
  struct BrokenDevice : FakeDevice {
    double elapsed_ms(Marker, Marker) override { return std::numeric_limits<double>::quiet_NaN(); }
  } device;
  TempDir dir("device_error");
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);
  { trace::ScopedSpan s("broken"); }
  trace::stop();
  trace::set_device_timer(nullptr);
  auto events = nlohmann::json::parse(read_text(dir.str() + "/rank-00000.json"));
  EXPECT_EQ(find_x(events, "broken"), nullptr);
  EXPECT_TRUE(device.live.empty());
}

TEST(TimedSpan, StaysHostTimedUnderADeviceTimerAndIsWrittenAtOnce) {
  // A TimedSpan's seconds feed a host-time metric, so its event must be the
  // same host interval, not a device one waiting for the GPU.
  TempDir dir("timed_device");
  FakeDevice device;
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);
  const size_t markers_before = device.live.size();
  double seconds = 0;
  {
    trace::TimedSpan s("grpo/rollout");
    device.clock_ms = 500;  // the device would say 500 ms
    seconds = s.elapsed_seconds();
  }
  EXPECT_EQ(device.live.size(), markers_before) << "a TimedSpan recorded device markers";
  trace::flush();  // the device has completed nothing, yet the event is written
  const std::string path = trace::file_path();
  const trace::Event* rollout = nullptr;
  auto events = trace::parse_trace(read_text(path), path).events;
  for (const auto& e : events)
    if (e.ph == "X" && e.name == "grpo/rollout") rollout = &e;
  ASSERT_NE(rollout, nullptr);
  EXPECT_GE(rollout->dur_us, seconds * 1e6);  // ends after the metric's reading
  EXPECT_LT(rollout->dur_us, 1e5);            // host time, far from the device's 500 ms
  trace::set_device_timer(nullptr);
  trace::stop();
}

namespace {
// FakeDevice that counts every call the trace makes on it.
struct CountingDevice : FakeDevice {
  int calls = 0;
  Marker record() override { return ++calls, FakeDevice::record(); }
  bool ready(Marker m) override { return ++calls, FakeDevice::ready(m); }
  void synchronize(Marker m) override { ++calls, FakeDevice::synchronize(m); }
  double elapsed_ms(Marker a, Marker b) override { return ++calls, FakeDevice::elapsed_ms(a, b); }
};
}  // namespace

TEST(DeviceTimerPause, MakesNoDeviceCallAndWritesHostTimes) {
  // A CUDA graph capture must not see an event recorded, queried or waited for.
  TempDir dir("device_pause");
  CountingDevice device;
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);
  device.clock_ms = 1;
  auto* open = new trace::ScopedSpan("outer");  // device-timed: a start marker
  int calls_before = device.calls;
  {
    trace::DeviceTimerPause capture;
    EXPECT_TRUE(trace::device_timer_paused());
    { trace::ScopedSpan inner("captured"); device.clock_ms = 500; }  // the device would say 499 ms
    delete open;     // ends inside the pause: its host times
    trace::flush();  // would query pending spans if there were a timer to ask
    EXPECT_EQ(device.calls, calls_before) << "the trace called the device timer during the pause";
  }
  EXPECT_FALSE(trace::device_timer_paused());
  trace::set_device_timer(nullptr);
  EXPECT_TRUE(device.live.empty()) << "the outer span's start marker was not released";
  trace::stop();
  auto events = nlohmann::json::parse(read_text(dir.str() + "/rank-00000.json"));
  for (const char* name : {"outer", "captured"}) {
    const auto* e = find_x(events, name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_LT((*e)["dur"].get<double>(), 1e5) << name << ": host time, not the device's ~500 ms";
  }
}

TEST(DeviceTimerPause, PendingSpanWaitsUnqueriedUntilResume) {
  TempDir dir("device_pause_pending");
  CountingDevice device;
  trace::start(dir.str(), 0);
  trace::set_device_timer(&device);
  device.clock_ms = 2;
  { trace::ScopedSpan s("before"); device.clock_ms = 9; }  // pending: the device has not got there
  device.completed_ms = 9;
  const std::string path = trace::file_path();
  {
    trace::DeviceTimerPause capture;
    const int calls = device.calls;
    trace::flush();
    EXPECT_EQ(device.calls, calls);
    for (const auto& e : trace::parse_trace(read_text(path), path).events) EXPECT_NE(e.name, "before");
  }
  trace::flush();  // resumed: the finished span is written from the device's clock
  const trace::Event* before = nullptr;
  auto events = trace::parse_trace(read_text(path), path).events;
  for (const auto& e : events)
    if (e.ph == "X" && e.name == "before") before = &e;
  ASSERT_NE(before, nullptr);
  EXPECT_DOUBLE_EQ(before->dur_us, 7000.0);  // device 2 ms -> 9 ms
  trace::set_device_timer(nullptr);
  trace::stop();
}

TEST(DeviceTimerPause, NestsAndRefusesAResumeWithoutAPause) {
  trace::pause_device_timer();
  trace::pause_device_timer();
  trace::resume_device_timer();
  EXPECT_TRUE(trace::device_timer_paused()) << "one of two pauses is still held";
  trace::resume_device_timer();
  EXPECT_FALSE(trace::device_timer_paused());
  EXPECT_THROW(trace::resume_device_timer(), hpcrl::RuntimeError);
}
