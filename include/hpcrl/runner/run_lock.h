// One job per run directory: rank 0 holds RUN/run.lock for the life of the job.
//
// The file names its holder (host, pid, Slurm job id, start time) and is flock()ed
// while the job lives. Another job that finds it:
//   - flock refused:                  a live job holds it -> InputError naming it;
//   - flock granted, the file empty:  released by a job that ended normally -> taken;
//   - flock granted, this host named: its process died (a kernel drops the flock of a
//                                     dead process) -> taken, with a warning;
//   - flock granted, another host:    flock may not reach across hosts on this file
//                                     system, so the job there may be alive -> InputError
//                                     saying how to clear it, unless the file names this
//                                     job's own SLURM_JOB_ID (a requeued job) -> taken.
// A job that ends (exit 0, 75, or an error that unwinds) empties the file, so the next
// job on any host takes it without a question. docs/reliability.md says what this
// guarantees on a shared parallel file system.
#pragma once

#include <string>

namespace hpcrl::runner {

struct LockHolder {
  std::string host;
  long pid = 0;
  std::string job;      // SLURM_JOB_ID, "" outside Slurm
  std::string since;    // UTC, ISO 8601
  std::string describe() const;  // "pid 123 on host h (Slurm job 77) since 2026-..."
};

// "" for an empty (released) file, else its holder; parse errors give a holder with
// only `host` = "unknown".
LockHolder parse_lock_holder(const std::string& text);
std::string format_lock_holder(const LockHolder& h);
// This process as a holder.
LockHolder this_process_holder();

class RunLock {
 public:
  // Takes `path` (created when missing) or throws InputError naming the holder and
  // the fix. `run_dir` is only for messages.
  static RunLock acquire(const std::string& path, const std::string& run_dir);
  RunLock() = default;
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  // Empties the file (released) and drops the flock.
  ~RunLock();
  bool held() const { return fd_ >= 0; }

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace hpcrl::runner
