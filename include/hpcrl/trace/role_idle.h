// Where each role of a disaggregated RL stage spent its time, as the trace
// measured it. The executor (algo/stages/disaggregated_rl.h) records its whole run as
// "<stage>/rounds" with args {generates, scores, rewards} (1 on generating
// ranks, on a reference's or critic's own ranks, on a reward model's own ranks
// respectively; all 0 on the trainer's) on every rank, and inside it the
// waits: "<stage>/wait_samples" (the trainer receiving a round's samples),
// "<stage>/weight_sync" (the trainer sending weights, which includes waiting
// for the generator to reach the sync) and "<stage>/wait_weights" (the
// generator receiving them, likewise). For each role over its ranks:
//   busy = rounds − waiting for data − waiting for weights
// (a reference's "data" is the trainer's request, a reward model's the
// generator's; their "weights" wait is their syncs).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/trace/reader.h"

namespace hpcrl::trace {

struct RoleIdleStats {
  std::string stage;         // "grpo", "ppo"
  std::string role;          // "generation" | "trainer" | "reference/critic" | "reward model" (on ranks of their own)
  int ranks = 0;
  double seconds = 0;        // Σ over the role's ranks of their rounds spans
  double busy = 0, waiting_data = 0, waiting_weights = 0;  // shares of `seconds`
};

// One row per (stage, role) that recorded rounds spans; empty for colocated runs.
std::vector<RoleIdleStats> role_idle(const std::vector<TraceFile>& files);

}  // namespace hpcrl::trace
