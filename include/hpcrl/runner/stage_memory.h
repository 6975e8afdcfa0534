// Each rank's peak memory over a stage, into metrics.jsonl (trace/memory_peaks.h
// names the keys): started over when the stage begins, gathered to rank 0 and
// written as one line when it ends. On run.device cuda the CUDA caching
// allocator's peak allocated and reserved bytes of this rank's device; on every
// device the process's peak resident set (VmHWM).
#pragma once

#include <cstdint>

#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::runner {

// Starts this rank's peaks over (the allocator's peak statistics; the resident
// set's peak through /proc/self/clear_refs). Local: no communication.
void reset_stage_memory_peaks(bool cuda);

// Collective over env.world: every rank's peaks since the reset go to rank 0,
// which writes them in one metrics line of env's stage at `step` (no line
// without a metrics writer; every rank still takes part).
void write_stage_memory_peaks(const algo::StageEnv& env, int64_t step);

}  // namespace hpcrl::runner
