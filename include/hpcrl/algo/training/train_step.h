// The pieces of one optimizer step that every training stage shares: a role's
// optimizer (optim/optimizer.h) and LR schedule built from the stage's hyper-
// parameters, and "finish the step" (reduce the gradients, clip, check for
// NaN/inf, update) — so SFT, GRPO, PPO and distillation step identically.
// `optim.zero` decides the optimizer once, here: 0 is plain AdamW, whose
// gradients are all-reduced over the gradient group; 1, 2 or 3 shard its state
// over that group (optim/sharded_adamw.h): gradients are reduce-scattered
// (ZeRO-1 after the backward, ZeRO-2 bucket by bucket during it) and the
// updated parameters all-gathered. With `optim.zero: 3` the parameters are
// sharded too while the Trainer lives (algo/training/zero3_units.h): every forward and
// backward gathers them unit by unit; when the Trainer goes, they are whole again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/zero3_units.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/optim/lr_schedule.h"
#include "hpcrl/optim/optimizer.h"

namespace hpcrl::algo {

class Trainer {
 public:
  // total_steps: optimizer steps of the stage (for the schedule).
  Trainer(Role& role, const config::TrainHparams& hp, int64_t total_steps, double lr_override = 0.0);
  // ZeRO-3: gathers the parameters for good (collective over the role's dp
  // group; skipped while an exception unwinds, when the run is over anyway).
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Call before each micro-batch's backward; `last` on the final one of the step.
  void begin_micro_batch(bool last) { optimizer_->begin_micro_batch(last); }
  // ZeRO-2/3: gradients are reduce-scattered as each backward produces them
  // and param.grad is released (the tied embedding's pp sum waits for the shards).
  bool reduces_during_backward() const { return optimizer_->reduces_during_backward(); }
  // Finishes the step: dp sync, clipping, update. Returns the pre-clip grad norm.
  // When the norm is NaN/inf: RuntimeError naming `stage`, `step`, the rank and a
  // tensor whose gradient is not finite — or, with on_nonfinite: skip_step, no
  // update for this step (the same on every rank: the norm is global) and that
  // error only after max_consecutive_skips skipped steps in a row.
  double finish_step(const std::string& stage, int64_t step, int world_rank);
  // on_nonfinite: skip_step is on; then skipped_steps() counts this stage's skipped steps.
  bool skips_nonfinite() const { return max_skips_ > 0; }
  int64_t skipped_steps() const { return skipped_; }

  double lr(int64_t step) const { return schedule_.at(step); }
  // The role's optimizer (plain AdamW or ZeRO-1/2/3), for checkpoints.
  optim::Optimizer& optimizer() { return *optimizer_; }
  Role& role() { return role_; }

 private:
  // ZeRO-2/3 under pp: the first and last stage add their reduced shards of
  // the tied embedding's gradient (its own bucket on both, so the same elements).
  void sum_tied_gradient_shards();
  // Whether the update may use gradients of norm `norm` (see finish_step).
  bool accept_norm(double norm, const std::string& stage, int64_t step, int world_rank);
  // Test hook: HPCRL_TEST_NONFINITE_GRAD="STAGE:STEP[,STEP...][@RANK]" makes this rank's
  // first gradient NaN at those steps of that stage (faults_e2e_test.cpp).
  void inject_nonfinite_for_test(const std::string& stage, int64_t step, int world_rank);
  // "the gradient of <name>" for the first parameter with a NaN/inf gradient on this rank.
  std::string nonfinite_tensor() const;
  // The first of the role's parameters (this rank's part) holding a NaN or an inf; "" when none.
  std::string nonfinite_weight() const;

  Role& role_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::shared_ptr<Zero3Units> zero3_;  // optim.zero: 3
  bool sums_tied_shards_ = false;      // ZeRO-2/3 under pp: the tied embedding has a bucket of its own
  optim::LrSchedule schedule_;
  double grad_clip_;
  int64_t max_skips_ = 0;  // > 0: on_nonfinite: skip_step
  int64_t skipped_ = 0, skipped_in_a_row_ = 0;
};

}  // namespace hpcrl::algo
