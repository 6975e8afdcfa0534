// `hpcrl plan`'s per-rank memory estimate beside the peaks a run measured
// (trace/memory_peaks.h), for `hpcrl trace summarize` and `hpcrl report`.
#pragma once

#include <string>

#include "hpcrl/trace/memory_peaks.h"

namespace hpcrl::cli {

// Sets every rank's plan_bytes to dist::rank_memory's peak for that rank, from
// RUN_DIR/config.resolved.yaml validated for the run's ranks (m.ranks()), and
// m.plan_note to where they came from, or why there are none (no peaks, no
// config, a config that does not validate, no architecture to estimate): the
// measured peaks are shown either way, so nothing here fails the command.
void add_plan_memory(trace::MemoryPeaks& m, const std::string& run_dir);

}  // namespace hpcrl::cli
