// Counts the ATen operator calls the host dispatches on one thread: the work
// that bounds a small model's step on a GPU, where each call costs the host
// microseconds whatever its size (issue: decode at 1–1.5 % of the H200's
// memory bandwidth). The count is the same on any device for the same code
// path, so a CPU test can pin how it grows (with rows, with samples per
// prompt) and a benchmark can report it beside the time.
//
// Only the calls made directly by hpcrl are counted — an operator's own calls
// to other operators inside it are not — so the count is what the engine asks
// for, not how LibTorch implements it. Counting installs a RecordFunction
// callback on the thread, which slows every call: it is for tests and
// benchmarks (GenerateStats' *_dispatches), never on by default.
#pragma once

#include <cstdint>

namespace hpcrl::rollout {

class DispatchCounter {
 public:
  DispatchCounter();   // counts from here, on this thread
  ~DispatchCounter();  // stops counting
  DispatchCounter(const DispatchCounter&) = delete;
  DispatchCounter& operator=(const DispatchCounter&) = delete;

  // Operator calls counted since construction.
  int64_t count() const;

  // The running count of the counter living on this thread, or 0 when none
  // does: read before and after a piece of work to attribute its calls.
  static int64_t now();
};

// Adds the calls the thread's counter counts while it lives (none when no
// counter lives) to `total`: how the engine attributes its calls to a part.
class DispatchTally {
 public:
  explicit DispatchTally(int64_t& total) : total_(total), start_(DispatchCounter::now()) {}
  ~DispatchTally() { total_ += DispatchCounter::now() - start_; }
  DispatchTally(const DispatchTally&) = delete;
  DispatchTally& operator=(const DispatchTally&) = delete;

 private:
  int64_t& total_;
  const int64_t start_;
};

}  // namespace hpcrl::rollout
