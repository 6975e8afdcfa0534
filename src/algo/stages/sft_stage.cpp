// The SFT stage loop (see sft_stage.h).
#include "hpcrl/algo/stages/sft_stage.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {

// One SFT stage run. Ranks outside the role hold no trainer and only advance
// the shared data cursor with the others.
class SftRun : public StageSteps {
 public:
  explicit SftRun(StageEnv& env);
  StageResult run();

  // Every rank advances the shared cursor, members of the role or not.
  std::string step(int64_t step) override {
    auto rows = sampler_.next_batch(cfg_.batch, role_.ctx.dp_rank(), role_.mesh.dp());
    return role_.member() ? train_step(step, rows) : std::string();
  }
  void evaluate(int64_t step) override;
  void checkpoint(int64_t step, bool eval_owed) override {
    checkpoint_stage(env_, step, saved_, sampler_, "sft", eval_owed);
  }

 private:
  // One optimizer step on this rank's `rows`; returns the progress note.
  std::string train_step(int64_t step, const std::vector<size_t>& rows);
  TokenBatch token_batch(const std::vector<size_t>& rows) const;
  // The step's forward and backward over its micro-batches; returns this
  // rank's NLL sum (at pp > 1 on the last stage only).
  at::Tensor forward_backward_nll(const TokenBatch& batch, double global_tokens);

  StageEnv& env_;
  const config::SftStage& cfg_;
  Role& role_;
  const DataSplits& data_;
  StageResult result_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<PromptBuilder> prompts_;
  io::DataSampler sampler_;
  int64_t local_batch_ = 0;  // this rank's rows of a step
  std::vector<TrainedRole> saved_;
  InsideStops eval_stops_;
  std::unique_ptr<tools::StageToolkit> eval_tools_;  // a stage with tools evaluates multi-turn over them
};

SftRun::SftRun(StageEnv& env)
    : env_(env),
      cfg_(std::get<config::SftStage>(env.stage->body)),
      role_(env.role(cfg_.model)),
      data_(env.data(cfg_.data)),
      sampler_(data_.train.size(), static_cast<uint64_t>(env.pipeline->run.seed) + 17u * env.stage_index,
               env.pipeline->find_data(cfg_.data)->shuffle, io::content_hash(data_.train)) {
  if (role_.member()) {
    trainer_ = std::make_unique<Trainer>(role_, cfg_.train, cfg_.steps);
    eval_tools_ = tools::stage_toolkit(*env.pipeline, cfg_.tools);
    prompts_ = std::make_unique<PromptBuilder>(*role_.tokenizer, env.pipeline->find_data(cfg_.data),
                                               tools::tool_schemas(eval_tools_.get()));
    role_.model->train();
    local_batch_ = role_.local_batch(cfg_.batch, env.stage->path + ".batch");
  }
  saved_ = {{&role_, trainer_ ? &trainer_->optimizer() : nullptr}};
  eval_stops_ = InsideStops(env, role_);
}

StageResult SftRun::run() {
  StageLoop loop;
  loop.name = "sft";
  loop.start = resume_stage(env_, saved_, sampler_, "sft", &loop.eval_owed);
  loop.total = cfg_.steps;
  loop.eval_every = cfg_.eval_every;
  loop.stop_at_accuracy = cfg_.stop_at_accuracy;
  run_stage_loop(env_, loop, *this, result_);
  return result_;
}

std::string SftRun::train_step(int64_t step, const std::vector<size_t>& rows) {
  trace::TimedSpan step_span("sft/step", {{"step", double(step)}});
  const TokenBatch batch = token_batch(rows);
  // Global response tokens of the step: the loss is a mean over all of them.
  // (The loss mask's count: a multi-turn trace's inserted replies are in the rows but not trained.)
  const double global_tokens = sum_over_dp(role_, batch.loss_mask.sum().item<double>());
  at::Tensor nll = forward_backward_nll(batch, global_tokens).reshape({1});
  const double grad_norm = trainer_->finish_step("sft", step, env_.world->rank());
  sum_step_values(role_, nll);
  const double loss = nll.item<double>() / global_tokens;
  const double seconds = step_span.elapsed_seconds();
  write_step_metrics(env_, "sft", step,
                     {loss, trainer_->lr(step), grad_norm, global_tokens / seconds, seconds, batch.mean_row_tokens(),
                      double(batch.padded_row_tokens()),
                      trainer_->skips_nonfinite() ? double(trainer_->skipped_steps()) : -1.0});
  return fmt::format("loss {:.4f}", loss);
}

TokenBatch SftRun::token_batch(const std::vector<size_t>& rows) const {
  std::vector<std::vector<int32_t>> p_ids, r_ids;
  std::vector<std::vector<uint8_t>> sampled(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    p_ids.push_back(prompts_->prompt_ids(data_.train[rows[k]]));
    r_ids.push_back(prompts_->response_ids(data_.train[rows[k]], sampled[k]));
  }
  return make_token_batch(p_ids, r_ids, std::max(0, role_.tokenizer->pad_id()), role_.ctx.sp_size(), role_.device(),
                          &sampled);
}

at::Tensor SftRun::forward_backward_nll(const TokenBatch& batch, double global_tokens) {
  trace::ScopedSpan span("sft/forward_backward", {{"tokens", global_tokens}});
  const int sp = role_.ctx.sp_size();
  const double grad_group = role_.ctx.grad ? role_.ctx.grad->size() : 1;
  const auto plan = plan_micro_batches(batch, micro_batch_options(cfg_.train, sp));
  std::vector<TokenBatch> shards;  // this sp rank's share of each micro-batch
  for (const MicroBatch& mb : plan) shards.push_back(sequence_shard(mb.tokens, role_.ctx.sp_rank(), sp));
  at::Tensor nll_sum = at::zeros({}, at::TensorOptions(at::kDouble).device(role_.device()));
  // Gradients are averaged over dp·sp, so each micro-batch's local NLL sum is scaled back up.
  auto scaled_nll = [&](size_t i, const at::Tensor& hidden) {
    auto lp = role_.model->token_logprobs(hidden, shards[i].targets, /*with_entropy=*/false);
    at::Tensor nll = -(lp.logprobs * shards[i].loss_mask).sum();
    nll_sum += nll.detach().to(at::kDouble);
    return nll * (grad_group / global_tokens);
  };
  forward_backward(role_, *trainer_, shards, scaled_nll, aux_loss_weights_by_rows(plan, local_batch_));
  return nll_sum;
}

void SftRun::evaluate(int64_t step) {
  if (!role_.member() || data_.eval.size() == 0) return;
  EvalOptions options = eval_options(*env_.pipeline);
  options.stops = &eval_stops_;
  options.tools = eval_tools_.get();
  auto r = algo::evaluate(role_, data_.eval, *prompts_, reward::VerifiableReward(), options);
  result_.eval_accuracy = r.accuracy;
  result_.eval_loss = r.loss;
  spdlog::info("sft step {}: eval loss {:.4f}, accuracy {:.3f} ({} examples, {:.1f}s)", step, r.loss, r.accuracy,
               r.examples, r.seconds);
  if (env_.metrics)
    env_.metrics->write("sft", env_.stage_index, step,
                        {{"eval/loss", r.loss}, {"eval/accuracy", r.accuracy},
                         {"eval/response_len", r.response_len}, {"seconds/eval", r.seconds}});
  if (env_.metrics) env_.metrics->write_samples("sft", env_.stage_index, step, r.samples);
}

}  // namespace

StageResult run_sft(StageEnv& env) { return SftRun(env).run(); }

}  // namespace hpcrl::algo
