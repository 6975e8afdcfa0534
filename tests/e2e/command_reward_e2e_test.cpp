// End-to-end: a GRPO stage whose reward sums a verifiable reward and a
// `command` reward (a user program speaking the JSON-lines protocol of
// docs/rewards.md §8). A program that adds a constant 0.5 must raise the mean
// reward by exactly 0.5 and leave the update untouched, since group-normalised
// advantages ignore a shift shared by the whole group; a program that dies is a
// run-time error naming the sample. With dynamic sampling, a program's scores
// decide how many rounds of rollouts an iteration draws: one when every group
// has a spread of rewards, all four when none has.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
// tests/e2e/data/tiny.yaml with a `judge` command reward; GRPO's reward line becomes `grpo_reward`.
std::string config_with_judge(const std::string& dir, const std::string& command,
                              const std::string& grpo_reward = "reward: [math, judge],") {
  return write_tiny_config_with(dir + "/judge.yaml",
                                {{"  math: {type: verifiable}\n",
                                  "  math: {type: verifiable}\n  judge: {type: command, command: '" + command +
                                      "', timeout_s: 20}\n"},
                                 {"reward: math,", grpo_reward}});
}

const std::string kShort = " --set stages.0.sft.steps=10 --set stages.2.distill.steps=2";

// GRPO scored by the judge alone, with dynamic sampling on.
std::string dynamic_sampling_config(const std::string& dir, const std::string& command) {
  return config_with_judge(dir, command, "reward: judge, dynamic_sampling: true,");
}
}  // namespace

TEST(CommandRewardE2E, ConstantJudgeShiftsTheRewardAndLeavesTheUpdateUnchanged) {
  const std::string dir = scratch_dir("judge");
  Proc plain = run_hpcrl("run tests/e2e/data/tiny.yaml" + kShort + " --out " + dir + "/plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string judge = "while read -r line; do echo \"{\\\"score\\\": 0.5}\"; done";
  Proc judged = run_hpcrl("run " + config_with_judge(dir, judge) + kShort + " --out " + dir + "/judged");
  ASSERT_EQ(judged.exit_code, 0) << judged.output;
  auto a = lines_with(read_metrics(dir + "/plain/metrics.jsonl"), "grpo", "reward/mean");
  auto b = lines_with(read_metrics(dir + "/judged/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_NEAR(b[i]["reward/mean"].get<double>(), a[i]["reward/mean"].get<double>() + 0.5, 1e-6);
    EXPECT_NEAR(b[i]["reward/std"].get<double>(), a[i]["reward/std"].get<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(b[i]["loss"].get<double>(), a[i]["loss"].get<double>());
    EXPECT_DOUBLE_EQ(b[i]["kl"].get<double>(), a[i]["kl"].get<double>());
  }
}

TEST(CommandRewardE2E, JudgeThatDiesIsAnErrorNamingTheSample) {
  const std::string dir = scratch_dir("judge-dies");
  const std::string judge = "read -r line; echo \"{\\\"score\\\": 1}\"; read -r line; echo judge gave up >&2; exit 3";
  Proc p = run_hpcrl("run " + config_with_judge(dir, judge) + kShort + " --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_NE(p.output.find("judge"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("sample 1"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("judge gave up"), std::string::npos) << "the program's stderr tail: " << p.output;
}

TEST(CommandRewardE2E, GrpoRaisesTheMeanRewardItIsGiven) {
  // A dense reward GRPO can move within seconds: shorter request lines (shorter responses) score higher.
  const std::string dir = scratch_dir("judge-short");
  std::ofstream(dir + "/judge.sh") << R"(while IFS= read -r line; do echo "{\"score\": -${#line}e-2}"; done)" << "\n";
  const std::string cfg = config_with_judge(dir, "sh " + dir + "/judge.sh");
  std::string y;
  {
    std::ifstream in(cfg);
    std::stringstream ss;
    ss << in.rdbuf();
    y = ss.str();
  }
  auto at = y.find("reward: [math, judge],");
  ASSERT_NE(at, std::string::npos);
  y.replace(at, std::string("reward: [math, judge],").size(), "reward: judge,");
  std::ofstream(cfg) << y;
  Proc p = run_hpcrl("run " + cfg +
                     " --set stages.0.sft.steps=10 --set stages.1.grpo.iterations=12 --set stages.1.grpo.lr=1.0e-3"
                     " --set stages.2.distill.steps=1 --set run.eval_before_train=false --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto g = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(g.size(), 12u);
  auto mean_of = [&](size_t lo, size_t hi) {
    double s = 0;
    for (size_t i = lo; i < hi; ++i) s += g[i]["reward/mean"].get<double>();
    return s / double(hi - lo);
  };
  EXPECT_GT(mean_of(9, 12), mean_of(0, 3) + 0.05) << "first iterations " << mean_of(0, 3) << ", last " << mean_of(9, 12);
}

TEST(CommandRewardE2E, DynamicSamplingStopsAtTheFirstRoundThatKeepsEveryGroup) {
  // The score is the sample's index in its group (0, 1, 2, 3): no group is all
  // equal, so the first round keeps all 8 prompts' groups and no refill runs.
  const std::string dir = scratch_dir("dynamic-one-round");
  const std::string judge = R"(sed -u "s/.*\"sample\":\([0-9]*\).*/{\"score\": \1}/")";
  Proc p = run_hpcrl("run " + dynamic_sampling_config(dir, judge) + kShort + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto lines = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "dynamic_sampling/rounds");
  ASSERT_EQ(lines.size(), 3u);  // iterations: 3
  for (const auto& m : lines) {
    EXPECT_EQ(m["dynamic_sampling/rounds"].get<double>(), 1.0) << m.dump();
    EXPECT_EQ(m["dynamic_sampling/kept_groups"].get<double>(), 8.0) << m.dump();  // prompts: 8
    EXPECT_DOUBLE_EQ(m["reward/mean"].get<double>(), 1.5) << m.dump();          // (0 + 1 + 2 + 3) / 4
  }
}

TEST(CommandRewardE2E, DynamicSamplingDrawsEveryRoundWhenNoGroupHasASignal) {
  // A constant score: every group is all equal and dropped, so each iteration
  // draws the most rounds (1 + 3 refills), keeps nothing and still completes.
  const std::string dir = scratch_dir("dynamic-no-signal");
  const std::string judge = "while read -r line; do echo \"{\\\"score\\\": 0.5}\"; done";
  Proc p = run_hpcrl("run " + dynamic_sampling_config(dir, judge) + kShort + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto lines = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "dynamic_sampling/rounds");
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& m : lines) {
    EXPECT_EQ(m["dynamic_sampling/rounds"].get<double>(), 4.0) << m.dump();
    EXPECT_EQ(m["dynamic_sampling/kept_groups"].get<double>(), 0.0) << m.dump();
  }
}
