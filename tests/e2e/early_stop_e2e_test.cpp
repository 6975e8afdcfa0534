// End-to-end: `stop_at_accuracy` ends a stage at the first periodic evaluation
// that reaches it — the steps before it are the uninterrupted run's, the
// checkpoint and complete.json name that step, the next stage starts from it,
// and under dp=2 every rank stops at the same step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {

// One-digit sums learn within seconds on tiny-2l, so accuracy moves between
// the evaluations every 5 steps.
const std::string kEasy = "run tests/e2e/data/tiny.yaml --set data.arith.synthetic.digits=1 "
                          "--set data.arith.synthetic.eval=30 ";
const std::string kSft = "{sft: {model: policy, data: arith, steps: 80, batch: 32, lr: 3.0e-3, warmup: 4, "
                         "schedule: cosine, eval_every: 5";

std::string sft_only(const std::string& extra) { return "--set 'stages=[" + kSft + extra + "}}]' "; }

struct EvalPoint {
  int64_t step;
  double accuracy;
};

std::vector<EvalPoint> sft_evals(const std::vector<nlohmann::json>& m) {
  std::vector<EvalPoint> out;
  for (const auto& j : lines_with(m, "sft", "eval/accuracy"))
    out.push_back({j["step"].get<int64_t>(), j["eval/accuracy"].get<double>()});
  return out;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The run stopped at its first periodic evaluation reaching `target`, and only there.
void expect_stopped_at_first_reach(const std::vector<EvalPoint>& evals, double target, int64_t step) {
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(evals.back().step, step);
  EXPECT_GE(evals.back().accuracy, target);
  for (size_t i = 1; i + 1 < evals.size(); ++i)  // evals[0] is before training
    EXPECT_LT(evals[i].accuracy, target) << "step " << evals[i].step << " already reached the target";
}

}  // namespace

TEST(EarlyStopE2E, SftEndsAtTheFirstEvaluationReachingTheTarget) {
  const std::string dir = scratch_dir("early-stop");
  Proc ref = run_hpcrl(kEasy + sft_only("") + "--out " + dir + "/full");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  auto ref_m = read_metrics(dir + "/full/metrics.jsonl");
  auto ref_evals = sft_evals(ref_m);
  // The target: the best periodic accuracy, first reached at step `stop` (before the last step).
  double target = 0;
  int64_t stop = 0;
  for (const auto& e : ref_evals)
    if (e.step > 0 && e.step < 80 && e.accuracy > target) target = e.accuracy, stop = e.step;
  ASSERT_GT(target, 0.0) << "the easy task learned nothing in 80 steps; the test needs accuracy to move";

  // Just below it, so the YAML number's rounding cannot move it past the measured value.
  const double threshold = target - 1e-6;
  char yaml_number[32];
  std::snprintf(yaml_number, sizeof yaml_number, "%.9f", threshold);
  Proc p = run_hpcrl(kEasy + sft_only(std::string(", stop_at_accuracy: ") + yaml_number) + "--out " + dir + "/stop");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto m = read_metrics(dir + "/stop/metrics.jsonl");
  expect_stopped_at_first_reach(sft_evals(m), threshold, stop);

  // The steps it ran are the uninterrupted run's, exactly.
  auto loss = lines_with(m, "sft", "loss"), ref_loss = lines_with(ref_m, "sft", "loss");
  ASSERT_EQ(loss.size(), size_t(stop));
  for (int64_t s = 0; s < stop; ++s) EXPECT_EQ(without_timing(loss[s]), without_timing(ref_loss[s])) << "step " << s + 1;

  EXPECT_EQ(read_json(dir + "/stop/checkpoints/00-sft/complete.json")["steps"].get<int64_t>(), stop);
  char step_dir[32];
  std::snprintf(step_dir, sizeof step_dir, "step-%06lld", static_cast<long long>(stop));
  EXPECT_TRUE(fs::exists(dir + "/stop/checkpoints/00-sft/" + step_dir + "/policy/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/stop/checkpoints/00-sft/step-000080"));
  EXPECT_NE(p.output.find("reached stop_at_accuracy"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find(std::to_string(stop) + "/80"), std::string::npos) << "final table names the steps run\n"
                                                                             << p.output;
}

TEST(EarlyStopE2E, NextStageStartsFromTheStoppedCheckpoint) {
  const std::string dir = scratch_dir("early-stop-next");
  // A target of 0.1 is reached part-way (see the test above's curve); GRPO then evaluates before its first iteration.
  const std::string stages =
      "--set 'stages=[" + kSft + ", stop_at_accuracy: 0.1}}, "
      "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 1, prompts: 4, "
      "group: 4, max_new_tokens: 16, kl: {coef: 0.01}}}]' ";
  Proc p = run_hpcrl(kEasy + stages + "--out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto m = read_metrics(dir + "/run/metrics.jsonl");
  auto sft = sft_evals(m);
  ASSERT_FALSE(sft.empty());
  ASSERT_LT(sft.back().step, 80) << "the target was not reached part-way";
  auto grpo = lines_with(m, "grpo", "eval/accuracy");
  ASSERT_FALSE(grpo.empty());
  EXPECT_EQ(grpo.front()["step"].get<int64_t>(), 0);
  // Same weights, same held-out prompts, greedy: the same accuracy and loss.
  EXPECT_EQ(grpo.front()["eval/accuracy"].get<double>(), sft.back().accuracy);
  auto sft_loss = lines_with(m, "sft", "eval/loss");
  EXPECT_DOUBLE_EQ(grpo.front()["eval/loss"].get<double>(), sft_loss.back()["eval/loss"].get<double>());
}

TEST(EarlyStopE2E, DataParallelRanksStopTogether) {
  const std::string dir = scratch_dir("early-stop-dp");
  Proc p = run_hpcrl(kEasy + sft_only(", stop_at_accuracy: 0.1") + "--out " + dir + "/run", 2);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto m = read_metrics(dir + "/run/metrics.jsonl");
  auto evals = sft_evals(m);
  ASSERT_FALSE(evals.empty());
  const int64_t stop = evals.back().step;
  ASSERT_LT(stop, 80) << "the target was not reached part-way";
  expect_stopped_at_first_reach(evals, 0.1, stop);
  EXPECT_EQ(lines_with(m, "sft", "loss").size(), size_t(stop));
  EXPECT_EQ(read_json(dir + "/run/checkpoints/00-sft/complete.json")["steps"].get<int64_t>(), stop);
}
