// Held-out loss and accuracy (see evaluation.h).
#include "hpcrl/algo/stages/evaluation.h"

#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include "hpcrl/algo/training/out_of_memory.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/stages/rollout_copy.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/progress.h"

namespace hpcrl::algo {

std::pair<double, int64_t> batch_nll(Role& role, const std::vector<std::vector<int32_t>>& prompt_ids,
                                     const std::vector<std::vector<int32_t>>& response_ids,
                                     const std::vector<std::vector<uint8_t>>* sampled) {
  torch::NoGradGuard no_grad;
  const int sp = role.ctx.sp_size();
  TokenBatch b = sequence_shard(make_token_batch(prompt_ids, response_ids, std::max(0, role.tokenizer->pad_id()), sp,
                                                 role.device(), sampled),
                                role.ctx.sp_rank(), sp);
  at::Tensor logprobs;
  if (role.ctx.pp_size() > 1) {
    logprobs = pipeline_logprobs(role, b.ids, b.targets);
  } else {
    auto out = role.model->forward(b.ids);
    logprobs = role.model->token_logprobs(out.hidden, b.targets, /*with_entropy=*/false).logprobs;
  }
  // This sp rank's chunk, packed as NllSums on the device; the sequence's totals are the sum over sp.
  struct NllSums {
    double nll, tokens;
  };
  at::Tensor sums = at::stack({-(logprobs * b.loss_mask).sum(), b.loss_mask.sum()}).to(at::kDouble);
  dist::all_reduce(role.ctx.sp, sums);
  const NllSums total = unpack<NllSums>(sums);
  return {total.nll, static_cast<int64_t>(total.tokens)};
}

namespace {
// What a rank's evaluation adds up, summed over dp together with the
// per-example correct counts in one reduction.
struct EvalSums {
  double nll = 0, loss_tokens = 0;  // teacher-forced loss on the reference responses
  double correct = 0, samples = 0, response_tokens = 0;
};

rollout::SamplingParams eval_sampling(const EvalOptions& options, const PromptBuilder& prompts) {
  rollout::SamplingParams sampling;
  sampling.temperature = options.temperature;
  sampling.top_p = options.top_p;
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.eos_ids = prompts.stop_ids();
  sampling.seed = options.seed;
  return sampling;
}

// One rank's evaluation in progress: what it samples with and what it has added up.
struct EvalPass {
  Role& role;
  const io::Dataset& eval;
  const PromptBuilder& prompts;
  const reward::VerifiableReward& verifier;
  const EvalOptions& options;
  rollout::Engine& engine;
  rollout::SamplingParams sampling;
  bool keeps_samples = false;  // dp rank 0 keeps the first kEvalSamplesKept for the report
  EvalSums sums;
  std::vector<trace::SampleLine> kept;
  at::Tensor correct_per_example;  // [total] doubles
};

// n samples of each prompt; multi-turn over the stage's tools when it has them.
std::vector<rollout::Sample> generate(EvalPass& pass, const std::vector<std::vector<int32_t>>& p_ids, int64_t start) {
  if (!pass.options.tools) return pass.engine.generate(p_ids, pass.options.n, pass.sampling);
  const tools::StageToolkit& kit = *pass.options.tools;
  tools::ToolTurns turns(kit.tools, kit.format, kit.limits, *pass.role.tokenizer, "eval", start);
  std::vector<tools::EpisodeStart> episodes;
  for (size_t i = 0; i < p_ids.size(); ++i)
    episodes.push_back({pass.eval[size_t(start) + i].prompt, pass.eval[size_t(start) + i].answer});
  turns.use_episodes(std::move(episodes));
  return pass.engine.run(p_ids, rollout::GenerationCall::fresh(int64_t(p_ids.size()), pass.options.n, &turns),
                         pass.sampling)
      .finished;
}

// Examples [start, end): the reference responses' loss (options.loss) and n samples each, scored.
void eval_batch(EvalPass& pass, int64_t start, int64_t end) {
  const EvalOptions& options = pass.options;
  std::vector<std::vector<int32_t>> p_ids, r_ids;
  std::vector<std::vector<uint8_t>> sampled(size_t(end - start));
  for (int64_t i = start; i < end; ++i) {
    p_ids.push_back(pass.prompts.prompt_ids(pass.eval[i]));
    r_ids.push_back(pass.prompts.response_ids(pass.eval[i], sampled[size_t(i - start)]));
  }
  if (options.loss) {
    auto [nll, tokens] = batch_nll(pass.role, p_ids, r_ids, &sampled);
    pass.sums.nll += nll;
    pass.sums.loss_tokens += tokens;
  }
  pass.sampling.seed = options.seed + static_cast<uint64_t>(start);
  auto per_example = pass.correct_per_example.accessor<double, 1>();
  for (const auto& s : generate(pass, p_ids, start)) {
    std::string text = pass.role.tokenizer->decode(s.tokens, /*skip_special=*/true);
    const io::Example& ex = pass.eval[start + s.prompt_index];
    const double correct = pass.verifier.score(text, ex.answer).correct ? 1.0 : 0.0;
    if (pass.keeps_samples && pass.kept.size() < kEvalSamplesKept)
      pass.kept.push_back({ex.prompt, text, ex.answer, correct});
    pass.sums.correct += correct;
    per_example[start + s.prompt_index] += correct;
    pass.sums.samples += 1.0;
    pass.sums.response_tokens += static_cast<double>(s.tokens.size());
  }
}

// The ranks' sums added over dp: loss, accuracy, response length and each example's correct samples.
EvalResult sum_evaluation(Role& role, const EvalSums& sums, const at::Tensor& correct_per_example, int64_t total) {
  // Rows were split over dp only; tp/sp ranks of one dp slot computed the same sums.
  const at::Tensor both = sum_over_dp(role, at::cat({pack(sums), correct_per_example}));
  const auto tot = unpack<EvalSums>(both.slice(0, 0, sums_fields<EvalSums>()));
  const at::Tensor per_example_tot = both.slice(0, sums_fields<EvalSums>()).contiguous();
  EvalResult r;
  r.loss = tot.loss_tokens > 0 ? tot.nll / tot.loss_tokens : 0.0;
  r.accuracy = tot.samples > 0 ? tot.correct / tot.samples : 0.0;
  r.response_len = tot.samples > 0 ? tot.response_tokens / tot.samples : 0.0;
  r.examples = total;
  auto counts = per_example_tot.accessor<double, 1>();
  for (int64_t i = 0; i < total; ++i) r.correct_per_example.push_back(static_cast<int64_t>(counts[i]));
  return r;
}

EvalResult evaluate_unguarded(Role& role, const io::Dataset& eval, const PromptBuilder& prompts,
                              const reward::VerifiableReward& verifier, const EvalOptions& options) {
  trace::TimedSpan span("eval");
  const int64_t total = options.prompts > 0 ? std::min<int64_t>(options.prompts, eval.size()) : eval.size();
  // This dp rank's examples: a contiguous block, so the union over dp is [0, total).
  const int64_t dp_rank = role.ctx.dp_rank(), dp = role.mesh.dp();
  const int64_t lo = total * dp_rank / dp, hi = total * (dp_rank + 1) / dp;

  // A pipelined role generates with its pp = 1 copy (loaded with the current weights here).
  auto model = sync_rollout_model(role);
  rollout::EngineOptions engine_options = rollout_engine_options(role, options.batch);
  if (options.stops) engine_options.abandon = options.stops->engine_hook(*model, "evaluation");
  rollout::Engine engine(model, role.tokenizer.get(), engine_options);
  EvalPass pass{role, eval, prompts, verifier, options, engine, eval_sampling(options, prompts), dp_rank == 0,
                /*sums=*/{}, /*kept=*/{}, /*correct_per_example=*/at::zeros({total}, at::kDouble)};
  const bool was_training = role.model->is_training();
  role.model->eval();
  // Every dp rank runs as many rounds as the largest share needs, so that the
  // world can agree on a stop between any two of them.
  const int64_t rounds = ((total + dp - 1) / dp + options.batch - 1) / options.batch;
  // The evaluation says what it does: what it will decode, then a progress line like training's.
  const bool speaks = dp_rank == 0;
  if (speaks)
    spdlog::info("evaluation: {} prompts x {} sample(s), up to {} new tokens each (run.eval_sampling)", total,
                 options.n, options.max_new_tokens);
  Progress progress("evaluation", static_cast<long>(total), speaks, "prompt");
  for (int64_t round = 0; round < rounds; ++round) {
    progress.update(static_cast<long>(std::min(total, round * options.batch * dp)));
    if (options.stops) options.stops->between_batches("evaluation");
    const int64_t start = lo + round * options.batch;
    if (start >= hi) continue;
    eval_batch(pass, start, std::min(hi, start + options.batch));
  }
  if (options.stops) options.stops->check("evaluation");
  progress.finish();
  if (was_training) role.model->train();
  EvalResult r = sum_evaluation(role, pass.sums, pass.correct_per_example, total);
  r.seconds = span.elapsed_seconds();
  r.samples = std::move(pass.kept);
  return r;
}

std::string eval_out_of_memory(int rank, const std::string& what, const EvalOptions& o) {
  return "the evaluation ran out of memory on rank " + std::to_string(rank) + " (" + what +
         "): it generates run.eval_sampling.prompts x n = " + std::to_string(o.prompts) + " x " +
         std::to_string(o.n) + " responses of up to run.eval_sampling.max_new_tokens = " +
         std::to_string(o.max_new_tokens) + " tokens, " + std::to_string(o.batch) +
         " prompts at a time; lower run.eval_sampling.n or .max_new_tokens";
}
}  // namespace

EvalResult evaluate(Role& role, const io::Dataset& eval, const PromptBuilder& prompts,
                    const reward::VerifiableReward& verifier, const EvalOptions& options) {
  try {
    return evaluate_unguarded(role, eval, prompts, verifier, options);
  } catch (const std::bad_alloc&) {
    throw RuntimeError(eval_out_of_memory(dist::world().rank, "std::bad_alloc", options));
  } catch (const c10::Error& e) {
    if (!is_out_of_memory(e)) throw;
    throw RuntimeError(eval_out_of_memory(dist::world().rank, e.what_without_backtrace(), options));
  }
}

}  // namespace hpcrl::algo
