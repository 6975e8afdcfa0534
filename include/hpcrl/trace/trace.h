// Per-rank timing trace: Chrome trace events ("ph":"X", pid = rank, tid = lane)
// written incrementally to <dir>/rank-NNNNN.json so a crashed run keeps its
// trace and Perfetto opens it. Spans nest by name ("grpo/actor_update/backward").
// When tracing is off every call returns after one branch, so spans can stay in
// hot loops (the cost is measured in benchmarks/).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::trace {

// Lanes (Chrome "tid"): what runs on which timeline row in Perfetto.
enum Lane : int { kMainLane = 0, kCommLane = 1, kPipelineLaneBase = 10 };

// Numeric event arguments (step, tokens, bytes, micro_batch, ...).
using Args = std::vector<std::pair<std::string, double>>;

struct Options {
  bool chrome = true;   // write Chrome trace events
  bool comm = true;     // record every communicator call
};

// Starts tracing for this rank into `dir` (created). Idempotent per process.
void start(const std::string& dir, int rank, const Options& options = {});
// Flushes and closes the trace file (also done at exit).
void stop();
bool enabled();
bool comm_enabled();

// Microseconds since the trace epoch (monotonic clock).
double now_us();

// Records a finished event.
void complete(const std::string& name, double start_us, double dur_us, int lane = kMainLane, const Args& args = {});

// Records one communicator call (op e.g. "all_reduce", group e.g. "policy/dp").
void comm(const std::string& op, const std::string& group, int64_t bytes, double start_us, double dur_us);

// Times its scope on the main lane (or `lane`). Nested spans are recorded as
// separate events whose intervals nest, which is how Perfetto draws them.
class ScopedSpan {
 public:
  explicit ScopedSpan(std::string name, Args args = {}, int lane = kMainLane);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;
  void add_arg(const std::string& key, double value);

 private:
  bool active_;
  std::string name_;
  Args args_;
  int lane_;
  double start_us_ = 0;
};

}  // namespace hpcrl::trace
