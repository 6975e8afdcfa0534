// `hpcrl run`: one pipeline run from YAML to run directory. Loads and validates
// the config for this world size, prepares runs/NAME (never overwriting without
// --force, continuing with --resume), sets up per-rank logs, traces and
// metrics, builds the roles, runs the stages in order (each starting from what
// the previous produced; `init: {from}` roles snapshotted when first used),
// and ends with a table of held-out accuracy and time per stage plus the trace
// summary. Returns the exit code: 0 done, 75 stopped resumably (preemption).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/runner/run_directory.h"

namespace hpcrl::runner {

struct RunOptions {
  std::string config_path;
  std::vector<std::string> overrides;  // --set a.b=v
  std::string out;                     // --out DIR ("" = run.out)
  RunDirMode mode = RunDirMode::kFresh;
  // Seconds the scheduler gives between its stop signal and the kill (--stop-lead;
  // sbatch --signal=USR1@SECONDS): a stop that could take longer is warned about
  // when measured, and the trace summary compares the two. 0 = unknown.
  double stop_lead_s = 0;
};

int run_pipeline(const RunOptions& options);

}  // namespace hpcrl::runner
