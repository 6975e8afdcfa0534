// The communication watchdog (run.comm_timeout_s, like NCCL's watchdog). MPI
// gives no timeout: a rank that stops (SIGSTOP, a hung file system, a GPU
// fault) leaves the others blocked in their next collective until the job's
// wall-clock limit. Every communication call marks its thread as waiting
// (WatchedCall); a thread of each rank checks those marks, and when one has
// waited longer than the timeout it asks the group's other ranks, over a
// communicator of its own, how far they got (every rank's watchdog answers
// while its own calls wait), then ends the job naming the call, the group and
// the ranks that did not arrive — with what they are doing instead, or that
// they did not answer (stopped, or dead).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpcrl::dist {

// Collective over the world: starts this rank's watchdog (a no-op for one rank
// or timeout_s <= 0). Idempotent.
void start_watchdog(double timeout_s);
// Stops and joins the watchdog thread; dist::finalize() calls it before MPI_Finalize.
void stop_watchdog();

// Marks the calling thread as inside communication call `op` on `group` (whose
// members are the world ranks `ranks`) for its lifetime. Cheap when the
// watchdog is off; `ranks` must outlive the call.
class WatchedCall {
 public:
  WatchedCall(const char* op, const std::string& group, const std::vector<int>& ranks);
  ~WatchedCall();
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  uint64_t id_ = 0;  // 0: not watched
};

}  // namespace hpcrl::dist
