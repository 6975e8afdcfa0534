// The pieces of one optimizer step that every training stage shares: a role's
// optimizer, LR schedule and gradient sync built from the stage's hyper-
// parameters, and "finish the step" (wait for the dp sync, clip, check for
// NaN/inf, update) — so SFT, GRPO, PPO and distillation step identically.
// With `optim.zero` 1, 2 or 3 the optimizer state is sharded over the gradient
// group (optim/sharded_adamw.h): gradients are reduce-scattered (ZeRO-1 after
// the backward, ZeRO-2 bucket by bucket during it) instead of all-reduced, and
// the updated parameters all-gathered. With `optim.zero: 3` the parameters are
// sharded too while the Trainer lives (algo/zero3_units.h): every forward and
// backward gathers them unit by unit; when the Trainer goes, they are whole again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hpcrl/algo/role.h"
#include "hpcrl/algo/zero3_units.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/grad_sync.h"
#include "hpcrl/optim/lr_schedule.h"
#include "hpcrl/optim/sharded_adamw.h"

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
  void begin_micro_batch(bool last) {
    sync_->prepare(last);
    expert_sync_->prepare(last);
    if (sharded_) sharded_->begin_micro_batch();
  }
  // ZeRO-2/3: gradients are reduce-scattered as each backward produces them
  // and param.grad is released (the tied embedding's pp sum waits for the shards).
  bool reduces_during_backward() const { return sharded_ && sharded_->stage() >= 2; }
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
  optim::Optimizer& optimizer() { return sharded_ ? static_cast<optim::Optimizer&>(*sharded_) : *optimizer_; }
  Role& role() { return role_; }

 private:
  double finish_sharded_step(const std::string& stage, int64_t step, int world_rank);
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
  optim::ParamSet params_;
  optim::ParamSet expert_params_;
  std::unique_ptr<optim::AdamW> optimizer_;         // optim.zero: 0
  std::unique_ptr<optim::ShardedAdamW> sharded_;   // optim.zero: 1, 2 or 3 (then the syncs below have no group)
  std::shared_ptr<Zero3Units> zero3_;              // optim.zero: 3
  std::unique_ptr<optim::GradSync> sync_;         // dense parameters over dp·sp
  std::unique_ptr<optim::GradSync> expert_sync_;  // this rank's experts over their edp replicas
  size_t tied_ = SIZE_MAX;  // ZeRO-2/3 under pp: the tied embedding's index in the dense group
  optim::LrSchedule schedule_;
  double grad_clip_;
  int64_t max_skips_ = 0;  // > 0: on_nonfinite: skip_step
  int64_t skipped_ = 0, skipped_in_a_row_ = 0;
};

}  // namespace hpcrl::algo
