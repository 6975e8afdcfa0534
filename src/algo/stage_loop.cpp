// The shared stage step loop and its checkpoint/resume helpers (see stage_loop.h).
#include "hpcrl/algo/stage_loop.h"

#include <spdlog/spdlog.h>

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
  if (env.world && env.world->size() > 1) env.world->all_reduce(hit, dist::ReduceOp::kMax);
  return hit.item<int>() != 0;
}
}  // namespace

void run_stage_loop(StageEnv& env, const StageLoop& loop, StageResult& result) {
  if (loop.start == 0 && env.pipeline->run.eval_before_train) loop.evaluate(0);
  Progress progress(loop.name, loop.total, env.progress && env.world->rank() == 0, loop.unit);
  for (int64_t s = loop.start; s < loop.total; ++s) {
    if (env.should_stop && env.should_stop()) {
      loop.checkpoint(s);
      result.stopped = true;
      result.steps_done = s;
      return;
    }
    progress.update(s + 1, loop.step(s));
    result.steps_done = s + 1;
    const bool last = s + 1 == loop.total;
    if (loop.eval_every > 0 && (s + 1) % loop.eval_every == 0 && !last) {
      loop.evaluate(s + 1);
      if (loop.stop_at_accuracy > 0 && reached_target(env, loop, result)) {
        progress.finish();
        spdlog::info("{}: held-out accuracy {:.3f} reached stop_at_accuracy {} after {} of {} {}s; the stage ends here",
                     loop.name, result.eval_accuracy, loop.stop_at_accuracy, s + 1, loop.total, loop.unit);
        loop.checkpoint(s + 1);
        return;
      }
    }
    if (env.checkpoint_every > 0 && (s + 1) % env.checkpoint_every == 0 && !last) loop.checkpoint(s + 1);
  }
  progress.finish();
  loop.evaluate(loop.total);
  loop.checkpoint(loop.total);
}

void write_step_metrics(const StageEnv& env, const std::string& name, int64_t step, const StepMetrics& m) {
  if (!env.metrics) return;
  trace::Metrics line = {{"loss", m.loss}, {"lr", m.lr}, {"grad_norm", m.grad_norm}, {"tokens_per_s", m.tokens_per_s},
                         {"seconds/step", m.seconds}};
  if (m.seq_len_max > 0) {
    line.emplace_back("seq_len/mean", m.seq_len_mean);
    line.emplace_back("seq_len/max", m.seq_len_max);
  }
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
                     const std::string& name) {
  if (!env.resume_from) return 0;
  const std::string& dir = *env.resume_from;
  auto state = load_train_checkpoint(dir, saved, env.world);
  const int64_t step = state.at("step").get<int64_t>();
  const int64_t total = env.stage->configured_steps();
  HPCRL_CHECK_INPUT(step <= total, dir << "/state.json: step " << step << " is past the " << total << " "
                                       << (env.stage->kind == config::StageKind::sft ||
                                                   env.stage->kind == config::StageKind::distill
                                               ? "steps"
                                               : "iterations")
                                       << " " << env.stage->path << " is configured for; the file is damaged or "
                                       << "belongs to another configuration: resume with the pipeline the run was "
                                          "started with, or from an earlier step directory");
  HPCRL_CHECK_INPUT(state.contains("cursor"), dir << "/state.json: no data cursor (\"cursor\"); the checkpoint is "
                                                     "damaged: resume from an earlier step directory or start over");
  sampler.restore(io::DataCursor::from_json(state.at("cursor"), dir + "/state.json"), dir);
  spdlog::info("{}: resumed at step {} from {}", name, step, dir);
  return step;
}

void checkpoint_stage(const StageEnv& env, int64_t step, const std::vector<TrainedRole>& saved,
                      const io::DataSampler& sampler, const std::string& name) {
  trace::ScopedSpan span(name + "/checkpoint");
  save_train_checkpoint(env.checkpoint_dir, step, saved, {{"cursor", sampler.cursor().to_json()}}, env.world,
                        env.keep_last);
}

}  // namespace hpcrl::algo
