// The step loop every stage shares: evaluate before training (when asked and
// not resuming), then per step: the collective stop check (checkpoint and
// return on preemption), the stage's own step, progress, periodic evaluation
// and checkpoints; at the end a final evaluation and checkpoint. A periodic
// evaluation that reaches `stop_at_accuracy` ends the stage there (checkpoint,
// no further steps): the target is met, so further steps only spend time, and
// a stage that is meant to stop part-way (SFT before RL) stops at the same
// accuracy whatever the seed's learning speed. A stop agreed inside a step or
// an evaluation (StepAbandoned, algo/stages/stop_inside.h) checkpoints the last
// complete step; when it was that step's evaluation that was cut short, the
// checkpoint says so and the resumed run evaluates first, so metrics.jsonl
// ends up with every evaluation exactly once. Also the
// pieces SFT, GRPO, PPO and distillation all need around it: evaluation
// options from the run config, and checkpoint/resume of a stage whose position
// in its data is one sampler cursor.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/algo/checkpoint/train_checkpoint.h"
#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/rollout/engine.h"

namespace hpcrl::algo {

// How many steps a stage runs and when it evaluates.
struct StageLoop {
  std::string name;                               // "sft", "grpo", ... (progress label, spans)
  std::string unit = "step";                      // progress unit
  int64_t start = 0, total = 0;                   // steps already done (resume), steps in the stage
  int64_t eval_every = 0;
  double stop_at_accuracy = 0;                    // 0 = off; needs eval_every > 0
  bool eval_owed = false;                         // resumed where the evaluation after `start` steps was cut short
};

// A stage's work as run_stage_loop drives it, implemented by each stage's run
// (SftRun, DistillRun, the GRPO/PPO iterations of policy_run.cpp).
class StageSteps {
 public:
  virtual ~StageSteps() = default;
  // Runs 0-based step s; returns the progress note.
  virtual std::string step(int64_t s) = 0;
  // Held-out evaluation after s steps.
  virtual void evaluate(int64_t s) = 0;
  // Checkpoint after s steps; eval_owed: the evaluation after step s was abandoned (resume does it first).
  virtual void checkpoint(int64_t s, bool eval_owed) = 0;
  // Undoes what a step abandoned part-way did to the stage's own state (its data
  // position), so that checkpoint(s) saves the start of step s. Nothing where no
  // step can be abandoned (the stage's steps poll no stop).
  virtual void rewind() {}
};

// Fills result.steps_done and result.stopped; steps.evaluate() fills the accuracy
// fields, which the early stop reads (collectively: any rank's evaluation counts).
void run_stage_loop(StageEnv& env, const StageLoop& loop, StageSteps& steps, StageResult& result);

// What a supervised step (SFT, distillation) reports.
struct StepMetrics {
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, seconds = 0;
  // Tokens per row of this rank's batch (prompt + response) and its longest row, which every row is
  // padded to: "seq_len/mean", "seq_len/max" (left out at 0, e.g. packed rows).
  double seq_len_mean = 0, seq_len_max = 0;
  double skipped_steps = -1;  // with on_nonfinite: skip_step, the stage's skipped steps so far; < 0: not counted
};
// Its metrics line after `step` + 1 steps (no-op without a metrics writer).
void write_step_metrics(const StageEnv& env, const std::string& name, int64_t step, const StepMetrics& m);

// A stage's generation settings (GRPO/PPO rollouts, distillation's
// generated responses) as the engine takes them; seed and prompt offset are
// the caller's, per call.
rollout::SamplingParams stage_sampling(const config::SamplingConfig& sampling, std::vector<int32_t> eos_ids);

// The run's held-out evaluation settings (run.eval_sampling).
EvalOptions eval_options(const config::PipelineConfig& pipeline);

// Continues from env.resume_from when set: restores `saved` and the sampler;
// returns the step to start at (0 without a checkpoint). `eval_owed` (when
// given) is set to whether that step's evaluation is still to be done.
int64_t resume_stage(const StageEnv& env, const std::vector<TrainedRole>& saved, io::DataSampler& sampler,
                     const std::string& name, bool* eval_owed = nullptr);
// What a stage saves beside its roles and cursor: state.json keys, and this rank's own files.
struct CheckpointExtras {
  nlohmann::json state = nlohmann::json::object();
  std::vector<CheckpointFile> files;
};
// Writes the stage checkpoint after `step` steps with the sampler's cursor (span "<name>/checkpoint").
void checkpoint_stage(const StageEnv& env, int64_t step, const std::vector<TrainedRole>& saved,
                      const io::DataSampler& sampler, const std::string& name, bool eval_owed = false,
                      const CheckpointExtras& extras = {});

}  // namespace hpcrl::algo
