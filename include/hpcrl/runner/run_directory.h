// The run directory (docs/reliability.md): runs/NAME/{config.resolved.yaml, command.json,
// metrics.jsonl, run.lock, trace/, checkpoints/, logs/}. An existing run directory is never
// touched unless the user says --resume (continue it) or --force (replace it), and --force
// replaces only a directory that is an hpcrl run holding nothing hpcrl did not write —
// never the working directory, an ancestor of it, or a directory holding the run's inputs.
// A new directory is assembled under a temporary name and renamed into place, so a failed
// start leaves nothing half-made behind. Rank 0 holds run.lock for the life of the job.
#pragma once

#include <string>
#include <vector>

#include "hpcrl/runner/resume_command.h"
#include "hpcrl/runner/run_lock.h"

namespace hpcrl::runner {

enum class RunDirMode { kFresh, kResume, kForce };

// --out / run.out as one spelling of the directory: "runs/x/" and "runs/./x" are "runs/x",
// "runs/base/.." is "runs". InputError for "" and for a symlink whose target is missing.
std::string normalize_run_root(const std::string& out);

// What hpcrl itself writes at the top of a run directory (the names --force may replace).
bool written_by_hpcrl(const std::string& top_level_name);

class RunDirectory {
 public:
  // InputError (nothing touched) when the directory exists without
  // --resume/--force, when --resume finds no run, when the directory is the working
  // directory or an ancestor of it, and (--force) when it is not an hpcrl run, holds
  // anything hpcrl did not write or holds one of `inputs` (the files the run reads).
  // Cheap: a run checks it before loading its inputs, and again in prepare().
  static void check(const std::string& root, RunDirMode mode, const std::vector<std::string>& inputs);
  // Rank 0 only (other ranks construct with `attach`). `resolved_config` is the
  // YAML text written as config.resolved.yaml, `command` what command.json
  // keeps of the start (resume_command.h). InputError (nothing touched) as
  // check(), when the parent is not writable, or when another job holds run.lock.
  static RunDirectory prepare(const std::string& root, RunDirMode mode, const std::vector<std::string>& inputs,
                              const std::string& resolved_config, const StartCommand& command);
  // Other ranks: the directory rank 0 prepared (no file-system changes).
  static RunDirectory attach(const std::string& root, bool resumed) { return RunDirectory(root, resumed); }

  const std::string& root() const { return root_; }
  std::string config_path() const { return root_ + "/config.resolved.yaml"; }
  std::string metrics_path() const { return root_ + "/metrics.jsonl"; }
  std::string trace_dir() const { return root_ + "/trace"; }
  std::string logs_dir() const { return root_ + "/logs"; }
  std::string checkpoints_dir() const { return root_ + "/checkpoints"; }
  bool resumed() const { return resumed_; }

 private:
  RunDirectory(std::string root, bool resumed, RunLock lock = {})
      : root_(std::move(root)), resumed_(resumed), lock_(std::move(lock)) {}
  std::string root_;
  bool resumed_;
  RunLock lock_;  // rank 0's hold on run.lock; released when the run ends
};

}  // namespace hpcrl::runner
