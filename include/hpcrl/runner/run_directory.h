// The run directory (DESIGN §6): runs/NAME/{config.resolved.yaml, command.json,
// metrics.jsonl, trace/, checkpoints/, logs/}. An existing run directory is never touched unless
// the user says --resume (continue it) or --force (replace it). A new directory
// is assembled under a temporary name and renamed into place, so a failed start
// leaves nothing half-made behind.
#pragma once

#include <string>

#include "hpcrl/runner/resume_command.h"

namespace hpcrl::runner {

enum class RunDirMode { kFresh, kResume, kForce };

class RunDirectory {
 public:
  // InputError (nothing touched) when the directory exists without
  // --resume/--force, or when --resume finds no run. Cheap: a run checks it
  // before loading its inputs, and again in prepare().
  static void check(const std::string& root, RunDirMode mode);
  // Rank 0 only (other ranks construct with `attach`). `resolved_config` is the
  // YAML text written as config.resolved.yaml, `command` what command.json
  // keeps of the start (resume_command.h). InputError (nothing touched) as
  // check(), or when the parent is not writable.
  static RunDirectory prepare(const std::string& root, RunDirMode mode, const std::string& resolved_config,
                              const StartCommand& command);
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
  RunDirectory(std::string root, bool resumed) : root_(std::move(root)), resumed_(resumed) {}
  std::string root_;
  bool resumed_;
};

}  // namespace hpcrl::runner
