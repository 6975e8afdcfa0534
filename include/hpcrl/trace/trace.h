// Per-rank timing trace: Chrome trace events ("ph":"X", pid = rank, tid = lane)
// written incrementally to <dir>/rank-NNNNN.json so a crashed run keeps its
// trace and Perfetto opens it. Spans nest by name ("grpo/actor_update/backward").
// When tracing is off every call returns after one branch, so spans can stay in
// hot loops (the cost is measured in benchmarks/trace/).
//
// Events are buffered and written when `flush_events` events are pending, with
// the first event `flush_interval_s` after the last write, when a top-level span
// (outermost on its thread) ends, at stop() and at exit. A forked child process
// stops tracing (it would otherwise write its copy of the buffer into the file).
// docs/tracing.md describes the naming scheme and the file format.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::trace {

// Lanes (Chrome "tid"): what runs on which timeline row in Perfetto.
// Lane names: 0 "main", 1 "comm", 2 "tools" (multi-turn rollouts' calls), kPipelineLaneBase + k "pp stage k", others "lane N"
// unless renamed with name_lane().
enum Lane : int { kMainLane = 0, kCommLane = 1, kToolsLane = 2, kPipelineLaneBase = 10 };
inline int pipeline_lane(int pp_stage) { return kPipelineLaneBase + pp_stage; }

// Numeric event arguments (step, tokens, bytes, micro_batch, ...).
using Args = std::vector<std::pair<std::string, double>>;

struct Options {
  bool chrome = true;   // write Chrome trace events (false: tracing stays off)
  bool comm = true;     // record every communicator call
  bool append = false;  // keep an existing rank file (resume): a truncated tail is cut, new events follow
  int flush_events = 256;        // write the buffer once this many events are pending
  double flush_interval_s = 2.0; // ... or at the first event this long after the last write
};

// Starts tracing for this rank into `dir` (created). Idempotent per process: a
// second call with the same dir and rank does nothing; a different one while
// tracing is a RuntimeError (call stop() first).
void start(const std::string& dir, int rank, const Options& options = {});
// Flushes and closes the trace file, ending the JSON array (also done at exit).
// Device-timed spans still in flight are waited for first.
void stop();
// Writes pending events now (device-timed spans whose device work is not done yet stay pending).
void flush();
// Path of this rank's trace file ("" when not tracing).
std::string file_path();

namespace detail {
// Read by every span; written by start()/stop(). Relaxed ordering: a span that
// races start/stop is either recorded whole or dropped.
inline std::atomic<bool> g_enabled{false};
inline std::atomic<bool> g_comm_enabled{false};
}  // namespace detail
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
inline bool comm_enabled() { return detail::g_comm_enabled.load(std::memory_order_relaxed); }

// Microseconds since the trace epoch (monotonic clock; first use in the process).
// Files store ts as Unix-epoch microseconds so ranks on different nodes line up.
double now_us();

// Names a lane in Perfetto (written as a thread_name metadata event).
void name_lane(int lane, const std::string& name);

// Records a finished event.
void complete(const std::string& name, double start_us, double dur_us, int lane = kMainLane, const Args& args = {});

// Records one communicator call (op e.g. "all_reduce", group e.g. "policy/dp")
// on the comm lane with args {"group", "bytes"}.
void comm(const std::string& op, const std::string& group, int64_t bytes, double start_us, double dur_us);

// Times its scope on the main lane (or `lane`). Nested spans are recorded as
// separate events whose intervals nest, which is how Perfetto draws them.
// With a device timer installed (device_timer.h) spans off the comm lane are
// measured on the device, so asynchronous kernels count.
//
// Cost when tracing is off: one relaxed load and a branch, inlined, with nothing
// constructed — for the `const char*` overloads without Args. The std::string
// and Args parameters are built by the caller before that branch (a heap
// allocation for names over 15 characters or any argument), so in hot loops use
// a string literal name and add_arg() (benchmarks/trace/ measures each form).
class ScopedSpan {
 public:
  explicit ScopedSpan(std::string name, Args args = {}, int lane = kMainLane) {
    if (enabled()) begin(std::move(name), std::move(args), lane);
  }
  explicit ScopedSpan(const char* name, int lane = kMainLane) {
    if (enabled()) begin(name, {}, lane);
  }
  ScopedSpan(const char* name, Args args, int lane = kMainLane) {
    if (enabled()) begin(name, std::move(args), lane);
  }
  ~ScopedSpan() {
    if (open_) end();
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;
  void add_arg(const std::string& key, double value) {
    if (open_) open_->args.emplace_back(key, value);
  }
  void add_arg(const char* key, double value) {
    if (open_) open_->args.emplace_back(key, value);
  }

 private:
  friend class TimedSpan;
  ScopedSpan(std::string name, Args args, int lane, double start_us) {
    if (enabled()) begin(std::move(name), std::move(args), lane, start_us);
  }
  // Exists only while tracing is on, so a disabled span constructs nothing.
  struct Open {
    std::string name;
    Args args;
    int lane;
    double start_us = 0;
    uint64_t device_gen = 0;    // device timer generation of the start marker; 0: host-timed
    uint64_t device_start = 0;  // DeviceTimer::Marker
  };
  void begin(std::string name, Args args, int lane, double start_us = -1);
  void end();

  std::optional<Open> open_;
};

// A span whose duration a metric needs too (seconds/<phase>, GenerateStats):
// it reads the clock when it opens whether or not tracing is on, and the trace
// event starts at that same reading, so the metric and the span are one
// measurement. Host time, also under a device timer. For hot loops where no
// metric reads the time, ScopedSpan stays cheaper.
class TimedSpan {
 public:
  explicit TimedSpan(std::string name, Args args = {}, int lane = kMainLane)
      : start_us_(now_us()), span_(std::move(name), std::move(args), lane, start_us_) {}
  void add_arg(const char* key, double value) { span_.add_arg(key, value); }
  // Seconds since the span opened.
  double elapsed_seconds() const { return (now_us() - start_us_) * 1e-6; }

 private:
  double start_us_;
  ScopedSpan span_;
};

}  // namespace hpcrl::trace
