// A GRPO/PPO stage's iteration loop, colocated or disaggregated (policy_run.h).
#include "hpcrl/algo/stages/policy_run.h"

#include <fmt/format.h>

#include "hpcrl/algo/remote/disaggregated_rl.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

StageResult run_policy_stage(StageEnv& env, PolicyStage& stage, PolicyTraining& training) {
  if (stage.disaggregated()) return run_disaggregated(env, stage, training);
  StageResult result;
  bool eval_owed = false;
  const int64_t start = stage.resume(training.saved, &eval_owed);
  StageLoop steps = stage.stage_loop(start, eval_owed, training.saved, result);
  steps.step = [&](int64_t it) -> std::string {
    trace::TimedSpan iter_span(stage.name() + "/iteration", {{"step", double(it)}});
    RlMetrics m;
    Experience exp = stage.collect(it, m);  // rollout, reward, old/ref log-probs
    training.train(exp, m, it);
    m.seconds = iter_span.elapsed_seconds();
    stage.write_metrics(it + 1, m, training.lr(it));
    return fmt::format("reward {:.3f}", m.reward_mean);
  };
  run_stage_loop(env, steps, result);
  return result;
}

}  // namespace hpcrl::algo
