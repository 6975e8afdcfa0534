// A GRPO/PPO stage's iteration loop, colocated or disaggregated (policy_run.h).
#include "hpcrl/algo/stages/policy_run.h"

#include <fmt/format.h>

#include "hpcrl/algo/stages/disaggregated_rl.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
// The colocated (or resharded) stage's iterations as the shared stage loop runs them.
class ColocatedIterations : public StageSteps {
 public:
  ColocatedIterations(PolicyStage& stage, PolicyTraining& training, StageResult& result)
      : stage_(stage), training_(training), result_(result) {}

  // Rollout, reward, old/reference log-probs, then the trainer's update and the metrics line.
  std::string step(int64_t it) override {
    trace::TimedSpan iter_span(stage_.name() + "/iteration", {{"step", double(it)}});
    RlMetrics m;
    Experience exp = stage_.collect(it, m);
    training_.train(exp, m, it);
    m.seconds = iter_span.elapsed_seconds();
    stage_.write_metrics(it + 1, m, training_.lr(it));
    return fmt::format("reward {:.3f}", m.reward_mean);
  }
  void evaluate(int64_t it) override { stage_.evaluate(it, result_); }
  void checkpoint(int64_t it, bool eval_owed) override { stage_.checkpoint(it, training_.saved(), eval_owed); }
  void rewind() override { stage_.producer().rewind(); }

 private:
  PolicyStage& stage_;
  PolicyTraining& training_;
  StageResult& result_;
};
}  // namespace

StageResult run_policy_stage(StageEnv& env, PolicyStage& stage, PolicyTraining& training) {
  switch (stage.plan().placement) {
    case GenerationPlacement::kDisaggregated:
      return run_disaggregated(env, stage, training);
    case GenerationPlacement::kColocated:
    case GenerationPlacement::kResharded:
      break;  // every rank generates, then trains: the stage loop below
  }
  StageResult result;
  bool eval_owed = false;
  const int64_t start = stage.resume(training.saved(), &eval_owed);
  ColocatedIterations iterations(stage, training, result);
  run_stage_loop(env, stage.stage_loop(start, eval_owed), iterations, result);
  return result;
}

}  // namespace hpcrl::algo
