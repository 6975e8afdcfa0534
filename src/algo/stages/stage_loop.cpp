// The shared stage step loop and its checkpoint/resume helpers (see stage_loop.h).
#include "hpcrl/algo/stages/stage_loop.h"

#include <spdlog/spdlog.h>

#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/trace/metrics.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/progress.h"

namespace hpcrl::algo {

namespace {
// Whether the evaluation just run reached the target on any rank. Collective over
// the world, so ranks outside the evaluated role stop at the same step.
bool reached_target(const StageEnv& env, const StageLoop& loop, const StageResult& result) {
  at::Tensor hit = at::full({1}, result.eval_accuracy >= loop.stop_at_accuracy ? 1 : 0, at::kInt);
  dist::all_reduce(env.world, hit, dist::ReduceOp::kMax);
  return hit.item<int>() != 0;
}

// Whether the periodic evaluation after `done` steps ends the stage (collective).
bool ends_at_target(const StageEnv& env, const StageLoop& loop, const StageResult& result, int64_t done) {
  const bool periodic = loop.eval_every > 0 && done % loop.eval_every == 0 && done != loop.total;
  if (!periodic || loop.stop_at_accuracy <= 0 || !reached_target(env, loop, result)) return false;
  spdlog::info("{}: held-out accuracy {:.3f} reached stop_at_accuracy {} after {} of {} {}s; the stage ends here",
               loop.name, result.eval_accuracy, loop.stop_at_accuracy, done, loop.total, loop.unit);
  return true;
}
}  // namespace

void run_stage_loop(StageEnv& env, const StageLoop& loop, StageSteps& steps, StageResult& result) {
  int64_t done = loop.start;  // complete steps
  bool eval_owed = false;     // the evaluation after `done` steps is running, not yet written
  int64_t evaluated = -1;     // the step whose evaluation has been written
  auto evaluate = [&](int64_t s) {
    eval_owed = true;
    steps.evaluate(s);
    eval_owed = false;
    evaluated = s;
  };
  result.steps_done = done;
  Progress progress(loop.name, loop.total, env.progress && env.world->rank() == 0, loop.unit);
  try {
    // Before the first step, unless a checkpoint exists: its evaluation is in metrics.jsonl already.
    if (loop.eval_owed) {
      evaluate(done);
      if (ends_at_target(env, loop, result, done)) return steps.checkpoint(done, false);
    } else if (done == 0 && !env.resume_from && env.pipeline->run.eval_before_train) {
      evaluate(0);
    }
    for (int64_t s = done; s < loop.total; ++s) {
      stop_point("step", env.world->rank());
      if (env.should_stop && env.should_stop()) {
        steps.checkpoint(s, false);
        result.stopped = true;
        return;
      }
      progress.update(s + 1, steps.step(s));
      result.steps_done = done = s + 1;
      const bool last = done == loop.total;
      if (loop.eval_every > 0 && done % loop.eval_every == 0 && !last) {
        evaluate(done);
        if (ends_at_target(env, loop, result, done)) {
          progress.finish();
          return steps.checkpoint(done, false);
        }
      }
      if (env.checkpoint_every > 0 && done % env.checkpoint_every == 0 && !last) steps.checkpoint(done, false);
    }
    progress.finish();
    if (evaluated != loop.total) evaluate(loop.total);
    steps.checkpoint(loop.total, false);
  } catch (const StepAbandoned&) {
    progress.finish();
    // Cut short inside step `done`: back to its start. Inside an evaluation: step `done` is complete.
    if (!eval_owed) steps.rewind();
    steps.checkpoint(done, eval_owed);
    result.stopped = true;
    result.steps_done = done;
  }
}

void write_step_metrics(const StageEnv& env, const std::string& name, int64_t step, const StepMetrics& m) {
  if (!env.metrics) return;
  trace::Metrics line{{"loss", m.loss},
                      {"lr", m.lr},
                      {"grad_norm", m.grad_norm},
                      {"tokens_per_s", m.tokens_per_s},
                      {"seconds/step", m.seconds}};
  if (m.seq_len_max > 0) {
    line.emplace_back("seq_len/mean", m.seq_len_mean);
    line.emplace_back("seq_len/max", m.seq_len_max);
  }
  if (m.skipped_steps >= 0) line.emplace_back("nonfinite/skipped_steps", m.skipped_steps);
  env.metrics->write(name, env.stage_index, step + 1, line);
}

rollout::SamplingParams stage_sampling(const config::SamplingConfig& sampling, std::vector<int32_t> eos_ids) {
  rollout::SamplingParams p;
  p.temperature = sampling.temperature;
  p.top_p = sampling.top_p;
  p.top_k = sampling.top_k;
  p.max_new_tokens = sampling.max_new_tokens;
  p.stop = sampling.stop;
  p.eos_ids = std::move(eos_ids);
  return p;
}

EvalOptions eval_options(const config::PipelineConfig& pipeline) {
  const auto& es = pipeline.run.eval_sampling;
  EvalOptions o;
  o.prompts = es.prompts;
  o.n = es.n;
  o.temperature = es.temperature;
  o.top_p = es.top_p;
  o.max_new_tokens = es.max_new_tokens;
  o.seed = static_cast<uint64_t>(pipeline.run.seed) * 7919u;
  return o;
}

int64_t resume_stage(const StageEnv& env, const std::vector<TrainedRole>& saved, io::DataSampler& sampler,
                     const std::string& name, bool* eval_owed) {
  if (!env.resume_from) return 0;
  const std::string& dir = *env.resume_from;
  auto state = load_train_checkpoint(dir, saved, env.world);
  const int64_t step = state.at("step").get<int64_t>();
  const int64_t total = env.stage->configured_steps();
  HPCRL_CHECK_INPUT(step <= total, dir << "/state.json: step " << step << " is past the " << total << " "
                                       << env.stage->step_unit()
                                       << " " << env.stage->path << " is configured for; the file is damaged or "
                                       << "belongs to another configuration: resume with the pipeline the run was "
                                          "started with, or from an earlier step directory");
  HPCRL_CHECK_INPUT(state.contains("cursor"), dir << "/state.json: no data cursor (\"cursor\"); the checkpoint is "
                                                     "damaged: resume from an earlier step directory or start over");
  sampler.restore(io::DataCursor::from_json(state.at("cursor"), dir + "/state.json"), dir);
  if (env.metrics) env.metrics->truncate_after(env.stage_index, step);  // the lines of the steps to be run again
  const bool owed = state.value("eval_owed", false);
  if (eval_owed) *eval_owed = owed;
  spdlog::info("{}: resumed at step {} from {}{}", name, step, dir, owed ? " (its evaluation first)" : "");
  return step;
}

void checkpoint_stage(const StageEnv& env, int64_t step, const std::vector<TrainedRole>& saved,
                      const io::DataSampler& sampler, const std::string& name, bool eval_owed,
                      const CheckpointExtras& extras) {
  trace::TimedSpan span(name + "/checkpoint");
  nlohmann::json state = extras.state;
  state["cursor"] = sampler.cursor().to_json();
  if (eval_owed) state["eval_owed"] = true;  // written only when set: other checkpoints stay as they were
  save_train_checkpoint(env.checkpoint_dir, step, saved, state, env.world, env.keep_last, extras.files);
  checkpoint_took(span.elapsed_seconds());
}

}  // namespace hpcrl::algo
