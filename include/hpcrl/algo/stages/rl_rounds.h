// The order of a disaggregated RL stage's work, as data (like the pipeline
// schedules of parallel/pipeline/schedule.h): one list of actions for the
// generating ranks and one for the trainer's, which one executor
// (algo/stages/disaggregated_rl.h) runs. Both lists are fixed by (start, end,
// max_staleness) alone, so every rank knows in advance which weight sync it
// meets the others at.
//
// Generation samples iteration i with the weights of at least i - k updates
// (k = max_staleness); a weight sync is due before generating i when i ≥ start
// + k + 1 (and once before anything, for the first weights). The trainer does
// what is possible first in the order sync > update > receive: a sync when the
// generator has sent the samples before it and the trainer holds enough
// updates, an update when its samples are in, a receive otherwise. k = 0 is
// the synchronous loop (sync, generate, train); k = 1 overlaps generating i + 1
// with training on i. Weights change between iterations, never inside one, so
// each sample has one behaviour version (see docs/placement.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpcrl::algo {

enum class RoundStep {
  kSyncWeights,     // trainer → generator weights (iteration: the one generated next); also the stop check
  kGenerate,        // generator: rollouts + rewards of `iteration`
  kSendSamples,     // generator → trainer
  kReceiveSamples,  // trainer
  kUpdate,          // trainer: old/ref log-probs, advantages, optimizer steps of `iteration`
};

struct RoundAction {
  RoundStep step;
  int64_t iteration;
  bool operator==(const RoundAction& o) const { return step == o.step && iteration == o.iteration; }
};

struct RoundPlan {
  std::vector<RoundAction> generation, training;
  int64_t start = 0;
  // version[i - start]: the trainer's updates when the weights iteration i is sampled with were sent.
  std::vector<int64_t> version;

  // The weight versions the plan's syncs carry (the trainer's updates at each), in order.
  std::vector<int64_t> sync_versions() const;
};

// Iterations [start, end); InternalError if the two lists could not meet (a planner bug).
RoundPlan plan_rounds(int64_t start, int64_t end, int64_t max_staleness);

// The plan from the sync before generating `iteration` on, in both lists: a run
// resumed from a checkpoint written at that sync (in_flight.h) re-enters there.
// nullopt when the plan has no such sync.
std::optional<RoundPlan> resume_plan(const RoundPlan& plan, int64_t iteration);

// "S5 G5 >5 ..." (sync, generate, send, <receive, update as U) for tests and logs.
std::string describe(const std::vector<RoundAction>& actions);

}  // namespace hpcrl::algo
