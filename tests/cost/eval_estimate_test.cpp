// A stage's held-out evaluations in the estimate and in validate's note: how many run,
// how many prompts each decodes, and their seconds as one rollout of those prompts.
#include <gtest/gtest.h>

#include "hpcrl/config/loader.h"
#include "hpcrl/cost/eval_work.h"
#include "hpcrl/cost/stage_estimate.h"

namespace hpcrl::cost {
namespace {

// SFT on tiny-2l: 10 steps, an eval split of `eval_rows`, evaluation settings `eval`.
config::PipelineConfig sft_config(int64_t eval_rows, const std::string& eval, const std::string& stage_extra = "") {
  const std::string yaml =
      "run: {name: est, seed: 1, eval_sampling: {" + eval + "}}\n"
      "models: {policy: {init: {preset: tiny-2l}}}\n"
      "data: {arith: {synthetic: {task: arithmetic, digits: 2, train: 64, eval: " + std::to_string(eval_rows) + "}}}\n"
      "stages:\n"
      "  - sft: {model: policy, data: arith, steps: 10, batch: 8" + stage_extra + "}\n";
  auto r = config::check_pipeline_text(yaml, "est.yaml", {}, {1, false});
  std::string errors;
  for (const auto& e : r.diagnostics.errors) errors += e.str() + "\n";
  EXPECT_TRUE(r.ok()) << errors;
  return std::move(r.config);
}
}  // namespace

TEST(EvalWork, EvaluationsAreBeforeEveryPeriodAndAtTheEnd) {
  EXPECT_EQ(evaluations_in_stage(10, 4, true), 4);   // before, after 4 and 8, at 10
  EXPECT_EQ(evaluations_in_stage(10, 5, true), 3);   // before, after 5, at 10 (periodic and last: once)
  EXPECT_EQ(evaluations_in_stage(10, 0, false), 1);  // at the end only
}

// Prompts one evaluation of `cfg`'s only stage decodes.
int64_t prompts_of(const config::PipelineConfig& cfg) { return eval_work(cfg, cfg.stages[0]).prompts; }

TEST(EvalWork, PromptsAreTheBoundOrTheSplitWhicheverIsSmaller) {
  EXPECT_EQ(prompts_of(sft_config(500, "max_new_tokens: 16")), config::kDefaultEvalPrompts);  // 256 of 500
  EXPECT_EQ(prompts_of(sft_config(64, "prompts: 100")), 64);
  EXPECT_EQ(prompts_of(sft_config(500, "prompts: 0")), 500);  // 0: the whole split
  EXPECT_EQ(prompts_of(sft_config(0, "")), 0);                // no split, no evaluation
}

TEST(EvalWork, ValidateNotesAnEvaluationOfMoreThanTwentyThousandTokens) {
  const auto big = sft_config(500, "prompts: 0, n: 2, max_new_tokens: 64");
  const EvalWork w = eval_work(big, big.stages[0]);
  EXPECT_EQ(w.max_tokens_each(), 64000);  // 500 prompts x 2 samples x 64 tokens
  EXPECT_EQ(eval_note(big.stages[0], w),
            "stages[0].sft: each of its 2 evaluation(s) decodes up to 500 prompts x 2 sample(s) x 64 tokens = 64000 "
            "tokens (run.eval_sampling); `hpcrl plan --estimate` gives its seconds, and run.eval_sampling.prompts, "
            ".max_new_tokens or the stage's eval_every make it cheaper");
  const auto small = sft_config(500, "prompts: 10, max_new_tokens: 64");  // 640 tokens
  EXPECT_EQ(eval_note(small.stages[0], eval_work(small, small.stages[0])), "");
}

TEST(EvalEstimate, OneEvaluationCostsARolloutOfItsPromptsAtTheTokenCap) {
  const auto cfg = sft_config(64, "prompts: 32, max_new_tokens: 16", ", eval_every: 5");
  const HardwareProfile hw = load_profile("h100-sxm");
  const auto est = estimate_pipeline(cfg, 1, hw, Shapes{});
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].eval.evaluations, 3);  // before, after 5, at 10
  // The same rollout by hand: 32 sequences of 64 prompt tokens (the default), 16 new tokens, 64 a batch.
  const RolloutCost r = rollout(*cfg.models[0].arch, Layout{}, hw, RolloutShape{32, 64, 16, 16, 64}, 4);
  EXPECT_DOUBLE_EQ(est[0].eval_seconds(), r.prefill.seconds() + r.decode.seconds());
  EXPECT_GT(est[0].eval_seconds(), 0.0);
  EXPECT_NE(estimate_text(est, hw).find("evaluation: 32 prompts x 1 sample(s), up to 16 new tokens each"),
            std::string::npos);
  EXPECT_EQ(estimate_json(est, hw)["stages"][0]["evaluation"]["evaluations"], 3);
}

}  // namespace hpcrl::cost
