// Stopping inside long work. A GRPO iteration's rollout or an evaluation can
// outlast what a scheduler leaves between its warning signal and the kill
// (Slurm's --signal=USR1@120), so a stop is also taken between decode steps
// and between evaluation batches, not only at step boundaries. Ranks that
// generate together (a tp group, an ep lockstep group: they run collectives
// every step) agree at every decode step and leave the same one; dp replicas
// decode independently and meet at the agreement after the work, collective
// over the world, where every rank learns of the stop and the step is
// abandoned (StepAbandoned): the stage loop then checkpoints the last complete
// step. Enabled only where the working role spans every rank of the run: a
// reference, reward model or critic on ranks of its own, or generation on
// ranks of its own, would not reach the agreement, so there a stop waits for
// the step boundary.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::algo {

// Thrown on every rank at the same agreement point once a stop is agreed;
// the partial step's results are discarded.
class StepAbandoned : public std::runtime_error {
 public:
  explicit StepAbandoned(const std::string& where) : std::runtime_error(where) {}
};

class InsideStops {
 public:
  InsideStops() = default;  // disabled: every check is a no-op
  // Enabled when env has a stop signal to poll and `role` spans the whole world.
  InsideStops(const StageEnv& env, const Role& role);

  bool enabled() const { return static_cast<bool>(signalled_); }
  // EngineOptions::abandon for a generation on `model` doing `work` ("rollout",
  // "evaluation"): this rank's signal, agreed over the model's tp group and then
  // its ep lockstep group (a tp × ep block of the expert grid, so every rank of
  // the block gets the same answer at the same step). Null when disabled.
  std::function<bool()> engine_hook(const model::DecoderModel& model, const std::string& work) const;
  // Collective over the world (when enabled): true when any rank was signalled.
  bool agreed() const;
  // Collective like agreed(); throws StepAbandoned naming `where` when a stop is agreed.
  void check(const std::string& where) const;
  // A point of `work` between two batches: test_signal_point, then check(work).
  void between_batches(const std::string& work) const;

 private:
  std::function<bool()> signalled_;
  dist::CommPtr world_;
};

// A point where this rank checks for a stop: "step" (a stage loop's step
// boundary), "rollout" or "evaluation" (a decode step or batch, where stops
// are enabled inside work). Measures the stretches between such points (the
// time a stop can take to be noticed, stop_latency()) and runs the test hook:
// HPCRL_TEST_STOP_SIGNAL="WORK:N[@RANK]" raises a real SIGUSR1 in this process
// (on world rank RANK only, when given) at the N-th (1-based) point of WORK, so
// a test can name where a preemption lands.
void stop_point(const std::string& work, int world_rank);

// How long a stop can take on this rank: the longest stretch between two stop
// points (the work in it cannot be cut short) plus the longest checkpoint.
struct StopLatency {
  double longest_gap_s = 0;
  std::string gap_ends_at;  // the stop point that ended it ("step", "rollout", ...)
  double longest_checkpoint_s = 0;
  double bound_s() const { return longest_gap_s + longest_checkpoint_s; }
};
const StopLatency& stop_latency();
// The seconds a scheduler gives between its stop signal and the kill (hpcrl run
// --stop-lead; 0 = unknown). Once the bound exceeds it, a warning says so (once).
void set_stop_lead(double seconds);
// Records a checkpoint's duration.
void checkpoint_took(double seconds);

}  // namespace hpcrl::algo
