// The pipeline bubble as the trace measured it: for each pp stage, the share
// of its pipelined steps spent outside forward and backward passes, next to
// the schedule's theory. The executor (parallel/pipeline/executor.h) records
// each step as a "pp/step" span on the stage's lane with args {stage, stages,
// microbatches, virtual_stages, theory} and each pass as "pp/forward" /
// "pp/backward" on the same lane; a step's bubble is
//   (step duration − passes inside it) / step duration,
// the idle time Perfetto shows between a stage's passes (waiting for a
// neighbour, the warm-up and cool-down of the schedule).
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/trace/reader.h"

namespace hpcrl::trace {

struct BubbleStats {
  int64_t stage = 0;         // pp rank
  int64_t steps = 0;         // pp/step spans of this stage over all ranks (dp/tp replicas)
  int ranks = 0;             // ranks that ran this stage
  double stages = 0;         // pp, microbatches m and virtual stages v of the steps
  double microbatches = 0;   // (the largest, when steps differ)
  double virtual_stages = 0;
  double mean_step_s = 0;
  double measured = 0;       // mean over steps of the idle share
  double theory = 0;         // mean over steps of the schedule's (p−1)/(m+p−1) (interleaved: (p−1)/(v·m+p−1))
};

// One row per pp stage that recorded pp/step spans, by stage; empty without pipelining.
std::vector<BubbleStats> pipeline_bubbles(const std::vector<TraceFile>& files);

}  // namespace hpcrl::trace
