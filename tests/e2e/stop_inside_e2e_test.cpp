// End-to-end: a stop signal that lands inside long work — a GRPO rollout, an
// evaluation — is taken there (between decode steps, between evaluation
// batches), not at the end of the step: the ranks agree, abandon the partial
// step, checkpoint the last complete one and exit 75, and the resumed run's
// metrics equal an uninterrupted run's, every evaluation line exactly once.
// HPCRL_TEST_STOP_SIGNAL (algo/stages/stop_inside.h) raises a real SIGUSR1 at a named
// point (the N-th decode step of a rollout, ...) on one chosen rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
// SFT, then 6 GRPO iterations of 8 prompts × 4 samples (≤ 33 engine steps per rollout).
const std::string kGrpo =
    kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 10, batch: 16, lr: 3.0e-3}}, "
              "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 6, "
              "prompts: 8, group: 4, max_new_tokens: 32, temperature: 1.0, lr: 1.0e-4, "
              "kl: {coef: 0.01, estimator: k3}}}]'";

// The iteration whose rollout a rank abandoned, from its log ("grpo iteration K's rollout").
int abandoned_iteration(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("stop agreed during grpo iteration (\\d+)'s rollout"))) return -1;
  return std::stoi(m[1]);
}

// The engine step at which a rank's generation was abandoned ("rollout: generation abandoned at engine step S").
int abandoned_engine_step(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("rollout: generation abandoned at engine step (\\d+)"))) return -1;
  return std::stoi(m[1]);
}

// Runs `cfg` straight, then stopped by `signal_at` and resumed (np ranks each), and
// checks the stop was taken inside a rollout and the resumed metrics equal the straight run's.
// Returns the stopped run's directory.
std::string stop_in_rollout_and_resume(const std::string& name, int np, const std::string& cfg,
                                       const std::string& signal_at) {
  const std::string dir = scratch_dir(name);
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight", np);
  EXPECT_EQ(straight.exit_code, 0) << straight.output;
  Proc stopped = run_hpcrl("run " + cfg + " --out " + dir + "/run", np, "HPCRL_TEST_STOP_SIGNAL=" + signal_at);
  EXPECT_EQ(stopped.exit_code, 75) << stopped.output;
  std::ofstream(dir + "/stopped.log") << stopped.output;
  const int k = abandoned_iteration(read_text(dir + "/run/logs/rank-00000.log"));
  EXPECT_GE(k, 1) << "the stop was not taken inside a rollout after the first iteration:\n" << stopped.output;
  EXPECT_LT(k, 6);
  // The checkpoint holds the last complete iteration; the abandoned one left no metrics line.
  char step[32];
  std::snprintf(step, sizeof step, "/step-%06d", k);
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoints/01-grpo" + std::string(step) + "/state.json")) << step;
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean").size(), size_t(k));
  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume", np);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
  return dir;
}
}  // namespace

TEST(StopInsideE2E, SignalDuringARolloutStopsBetweenDecodeStepsAndResumesExactly) {
  // The 45th rollout engine step is inside the second or a later iteration's rollout.
  stop_in_rollout_and_resume("stop-rollout", 1, kGrpo, "rollout:45");
}

TEST(StopInsideE2E, SignalOnOneDpRankStopsEveryRankInsideTheRollout) {
  // dp = 2: rank 1 alone gets the signal and abandons its rollout; rank 0 learns of
  // it at the agreement after its own rollout; both checkpoint and exit 75.
  const std::string dir = stop_in_rollout_and_resume("stop-rollout-dp2", 2, kGrpo, "rollout:45@1");
  // Rank 1 wrote the arrival line on stderr at once, and its log says when it checkpointed.
  const std::string log1 = read_text(dir + "/run/logs/rank-00001.log");
  EXPECT_NE(read_text(dir + "/stopped.log").find("[rank 1] SIGUSR1 received: stopping at the next safe point"),
            std::string::npos);
  EXPECT_NE(log1.find("s after SIGUSR1 arrived"), std::string::npos) << "rank 1's log";
  EXPECT_EQ(read_text(dir + "/run/logs/rank-00000.log").find("arrived"), std::string::npos) << "rank 0 got no signal";
  EXPECT_EQ(abandoned_iteration(log1), abandoned_iteration(read_text(dir + "/run/logs/rank-00000.log")));
}

TEST(StopInsideE2E, TensorParallelPartnersAbandonTheSameDecodeStep) {
  // 4 ranks, tp = 2 × dp = 2: the signal reaches rank 1 only. Its tp partner, rank 0,
  // runs a collective with it in every decode step, so both must leave at the same
  // engine step; the other tp group (ranks 2, 3) finishes its rollout and learns of
  // the stop at the agreement after it.
  const std::string cfg = kGrpo + " --set models.policy.parallel.tp=2 --set models.reference.parallel.tp=2";
  const std::string dir = stop_in_rollout_and_resume("stop-rollout-tp2", 4, cfg, "rollout:45@1");
  const int s0 = abandoned_engine_step(read_text(dir + "/run/logs/rank-00000.log"));
  const int s1 = abandoned_engine_step(read_text(dir + "/run/logs/rank-00001.log"));
  EXPECT_GT(s0, 0) << "rank 0 did not abandon its generation";
  EXPECT_EQ(s0, s1) << "tp partners left their rollout at different steps";
  EXPECT_EQ(abandoned_engine_step(read_text(dir + "/run/logs/rank-00002.log")), -1)
      << "rank 2 got no signal and its tp group decodes on until its rollout ends";
}

TEST(StopInsideE2E, SignalDuringAnEvaluationOwesItToTheResumedRun) {
  // SFT evaluates every 5 steps (64 prompts, one batch, ≤ 33 engine steps each); the
  // 50th evaluation point is inside the evaluation after step 5, not the opening one.
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 20, batch: 16, "
                                    "lr: 3.0e-3, eval_every: 5}}]'";
  const std::string dir = scratch_dir("stop-eval");
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  Proc stopped = run_hpcrl("run " + cfg + " --out " + dir + "/run", 1, "HPCRL_TEST_STOP_SIGNAL=evaluation:50");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  EXPECT_NE(stopped.output.find("stop agreed during evaluation"), std::string::npos) << stopped.output;
  // Step 5 is complete; its evaluation is owed.
  const std::string state = read_text(dir + "/run/checkpoints/00-sft/step-000005/state.json");
  EXPECT_NE(state.find("\"eval_owed\": true"), std::string::npos) << state;
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "eval/accuracy").size(), 1u)
      << "only the opening evaluation was written";
  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("(its evaluation first)"), std::string::npos) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
}

TEST(StopInsideE2E, StopOnStepZeroOfAStageWritesItsOpeningEvaluationOnce) {
  // The 11th step boundary is GRPO's step 0 (SFT has 10), after GRPO's opening
  // evaluation: the resumed run must not evaluate step 0 again (it did: the
  // line appeared twice in metrics.jsonl).
  const std::string cfg = kGrpo + " --set stages.1.grpo.iterations=3";
  const std::string dir = scratch_dir("stop-step0");
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  Proc stopped = run_hpcrl("run " + cfg + " --out " + dir + "/run", 1, "HPCRL_TEST_STOP_SIGNAL=step:11");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  EXPECT_TRUE(fs::exists(dir + "/run/checkpoints/01-grpo/step-000000/state.json"));
  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  size_t opening = 0;
  for (const auto& j : lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "eval/accuracy"))
    opening += j["step"] == 0;
  EXPECT_EQ(opening, 1u);
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
}

// --stop-lead is what the scheduler leaves between its signal and the kill. A run
// whose stretches without a stop check (plus a checkpoint) exceed it is warned at
// once, and the trace summary compares the two at the end.
const std::string kShortSft =
    kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 3, batch: 16, lr: 3.0e-3}}]'";

TEST(StopInsideE2E, AStretchLongerThanTheStopLeadIsWarnedAtOnceAndInTheSummary) {
  // 1 ms: any stretch between two stop checks of a real run is longer.
  const std::string dir = scratch_dir("stop-lead-short");
  Proc p = run_hpcrl("run " + kShortSft + " --out " + dir + "/run --stop-lead 0.001");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("a stop may take longer than the 0.001 s the scheduler gives"), std::string::npos)
      << p.output;
  const std::string summary = read_text(dir + "/run/trace/summary.md");
  EXPECT_NE(summary.find("against a lead of 0.001 s (--stop-lead): LONGER: a preempted job would be killed first"),
            std::string::npos)
      << summary;
}

TEST(StopInsideE2E, AStopLeadLongerThanEveryStretchGivesNoWarning) {
  const std::string dir = scratch_dir("stop-lead-long");
  Proc p = run_hpcrl("run " + kShortSft + " --out " + dir + "/run --stop-lead 100000");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(p.output.find("a stop may take longer"), std::string::npos) << p.output;
  EXPECT_NE(read_text(dir + "/run/trace/summary.md").find("against a lead of 100000 s (--stop-lead): within it"),
            std::string::npos);
}
