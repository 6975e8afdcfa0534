// The SFT stage loop (see sft_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/sft_stage.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>

#include "hpcrl/algo/evaluation.h"
#include "hpcrl/algo/forward_backward.h"
#include "hpcrl/algo/micro_batches.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/prompting.h"
#include "hpcrl/algo/stage_loop.h"
#include "hpcrl/algo/token_batch.h"
#include "hpcrl/algo/train_step.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

StageResult run_sft(StageEnv& env) {
  const auto& cfg = env.stage->sft;
  const auto& pipeline = *env.pipeline;
  Role& role = env.role(cfg.model);
  const DataSplits& data = env.data(cfg.data);
  const int world_rank = env.world->rank();
  StageResult result;

  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<PromptBuilder> prompts;
  if (role.member()) {
    trainer = std::make_unique<Trainer>(role, cfg.train, cfg.steps);
    prompts = std::make_unique<PromptBuilder>(*role.tokenizer, pipeline.find_data(cfg.data));
    role.model->train();
  }
  io::DataSampler sampler(data.train.size(), static_cast<uint64_t>(pipeline.run.seed) + 17u * env.stage_index,
                          pipeline.find_data(cfg.data)->shuffle);
  const int64_t local_batch = role.member() ? role.local_batch(cfg.batch, env.stage->path + ".batch") : 0;

  std::vector<TrainedRole> saved{{&role, trainer ? &trainer->optimizer() : nullptr}};
  const int64_t start = resume_stage(env, saved, sampler, "sft");
  auto run_eval = [&](int64_t step) {
    if (!role.member() || data.eval.size() == 0) return;
    auto r = evaluate(role, data.eval, *prompts, reward::VerifiableReward(), eval_options(pipeline));
    result.eval_accuracy = r.accuracy;
    result.eval_loss = r.loss;
    spdlog::info("sft step {}: eval loss {:.4f}, accuracy {:.3f} ({} examples, {:.1f}s)", step, r.loss, r.accuracy,
                 r.examples, r.seconds);
    if (env.metrics)
      env.metrics->write("sft", env.stage_index, step,
                         {{"eval/loss", r.loss}, {"eval/accuracy", r.accuracy},
                          {"eval/response_len", r.response_len}, {"seconds/eval", r.seconds}});
  };

  // One optimizer step on this rank's rows; returns the progress note.
  auto train_step = [&](int64_t step, const std::vector<size_t>& rows) -> std::string {
    trace::ScopedSpan step_span("sft/step", {{"step", double(step)}});
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> p_ids, r_ids;
    for (size_t i : rows) {
      p_ids.push_back(prompts->prompt_ids(data.train[i]));
      r_ids.push_back(prompts->response_ids(data.train[i]));
    }
    const int sp = role.ctx.sp_size();
    TokenBatch batch = make_token_batch(p_ids, r_ids, std::max(0, role.tokenizer->pad_id()), sp, role.device());
    // Global response tokens of the step: the loss is a mean over all of them.
    at::Tensor counts = at::tensor({double(batch.response_tokens())}, at::kDouble);
    if (role.ctx.dp && role.ctx.dp->size() > 1) role.ctx.dp->all_reduce(counts);
    const double global_tokens = counts.item<double>();
    const double grad_group = role.ctx.grad ? role.ctx.grad->size() : 1;

    at::Tensor nll_sum = at::zeros({}, at::TensorOptions(at::kDouble).device(role.device()));
    {
      trace::ScopedSpan span("sft/forward_backward", {{"tokens", global_tokens}});
      // Gradients are averaged over dp·sp, so each micro-batch's local NLL sum is scaled back up.
      auto scaled_nll = [&](const at::Tensor& hidden, const TokenBatch& mb) {
        auto lp = role.model->token_logprobs(hidden, mb.targets, /*with_entropy=*/false);
        at::Tensor nll = -(lp.logprobs * mb.loss_mask).sum();
        nll_sum += nll.detach().to(at::kDouble);
        return nll * (grad_group / global_tokens);
      };
      const auto plan = plan_micro_batches(batch, micro_batch_options(cfg.train, sp));
      std::vector<TokenBatch> mbs;  // this sp rank's share of each micro-batch
      for (const MicroBatch& mb : plan) mbs.push_back(sequence_shard(mb.tokens, role.ctx.sp_rank(), sp));
      // With pp only the last stage computes the loss; its NLL reaches the others below.
      forward_backward(
          role, *trainer, mbs, [&](size_t i, const at::Tensor& hidden) { return scaled_nll(hidden, mbs[i]); },
          aux_loss_weights_by_rows(plan, local_batch));
    }
    double grad_norm = trainer->finish_step("sft", step, world_rank);
    at::Tensor nll_total = nll_sum.reshape({1});
    share_from_last_stage(role, nll_total);
    if (role.ctx.grad && role.ctx.grad->size() > 1) role.ctx.grad->all_reduce(nll_total);
    const double loss = nll_total.item<double>() / global_tokens;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (env.metrics)
      env.metrics->write("sft", env.stage_index, step + 1,
                         {{"loss", loss}, {"lr", trainer->lr(step)}, {"grad_norm", grad_norm},
                          {"tokens_per_s", global_tokens / seconds}, {"seconds/step", seconds}});
    return fmt::format("loss {:.4f}", loss);
  };

  StageLoop loop;
  loop.name = "sft";
  loop.start = start;
  loop.total = cfg.steps;
  loop.eval_every = cfg.eval_every;
  loop.stop_at_accuracy = cfg.stop_at_accuracy;
  loop.step = [&](int64_t step) {
    // Every rank advances the shared cursor, members of the role or not.
    auto rows = sampler.next_batch(cfg.batch, role.dp_rank, role.dp_size);
    return role.member() ? train_step(step, rows) : std::string();
  };
  loop.evaluate = run_eval;
  loop.checkpoint = [&](int64_t step) { checkpoint_stage(env, step, saved, sampler, "sft"); };
  run_stage_loop(env, loop, result);
  return result;
}

}  // namespace hpcrl::algo
