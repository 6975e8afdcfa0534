// Evaluation says what it does (docs/eval.md): a line of what it will decode, a bounded
// default, and a few generations with their rewards in eval_samples.jsonl for the report.
#include <gtest/gtest.h>

#include <filesystem>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
// SFT alone, 2 steps, evaluated before and after on the first 4 held-out prompts.
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 2, batch: 4}}]'" +
                         " --set run.eval_sampling.prompts=4";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST(EvaluationE2E, SaysWhatItWillDecode) {
  const std::string dir = scratch_dir("eval-line");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  // tiny.yaml: run.eval_sampling.max_new_tokens = 32.
  EXPECT_TRUE(has(p.output, "evaluation: 4 prompts x 1 sample(s), up to 32 new tokens each (run.eval_sampling)"))
      << p.output;
}

TEST(EvaluationE2E, TheDefaultEvaluationIsBounded) {
  const std::string dir = scratch_dir("eval-bound");
  // 300 held-out rows and no eval_sampling.prompts: the default bound (256) applies.
  Proc p = run_hpcrl("run " + kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 1, batch: 2}}]'" +
                     " --set 'run.eval_sampling={max_new_tokens: 1}' --set run.eval_before_train=false" +
                     " --set data.arith.synthetic.eval=300 --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, "evaluation: 256 prompts x 1 sample(s), up to 1 new tokens each")) << p.output;
}

TEST(EvaluationE2E, KeepsEachEvaluationsFirstGenerationsWithTheirRewards) {
  const std::string dir = scratch_dir("eval-samples");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto samples = read_metrics(dir + "/run/eval_samples.jsonl");
  const auto evals = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "eval/accuracy");
  ASSERT_EQ(evals.size(), 2u);       // before training (step 0) and at the end (step 2)
  ASSERT_EQ(samples.size(), 8u);     // 4 generations kept of each
  for (size_t e = 0; e < 2; ++e) {
    double rewards = 0;
    for (size_t i = 4 * e; i < 4 * e + 4; ++i) {
      EXPECT_EQ(samples[i]["stage"], 0);
      EXPECT_EQ(samples[i]["kind"], "sft");
      EXPECT_EQ(samples[i]["step"], evals[e]["step"]);
      EXPECT_FALSE(samples[i]["prompt"].get<std::string>().empty());
      rewards += samples[i]["reward"].get<double>();
    }
    // All 4 evaluated prompts are kept, so their rewards average to the line's accuracy.
    EXPECT_DOUBLE_EQ(rewards / 4, evals[e]["eval/accuracy"].get<double>());
  }
}
