// The cost model beside a finished run: RUN_DIR's own pipeline
// (config.resolved.yaml) estimated on a hardware profile with the lengths the
// run measured (metrics.jsonl, as `plan --estimate --from-run` takes them), and
// the same spans measured in its traces (trace/estimate_comparison.h defines
// every column). What `hpcrl report --estimate` and `hpcrl trace summarize
// --estimate` show.
#pragma once

#include <string>
#include <vector>

#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/trace/estimate_comparison.h"
#include "hpcrl/trace/reader.h"

namespace hpcrl::cost {

// `files`: the run's rank traces (trace::read_run_traces). InputError when RUN_DIR has no
// config.resolved.yaml or it no longer validates (naming the file and the first error).
trace::EstimateComparison compare_with_run(const std::string& run_dir, const std::vector<trace::TraceFile>& files,
                                           const HardwareProfile& hw);

}  // namespace hpcrl::cost
