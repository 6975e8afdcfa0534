// End-to-end resume under the failures a cluster produces: SIGKILL at arbitrary
// moments while a checkpoint is written every step (the last complete one must
// always load, and the resumed run must equal the uninterrupted one), and a
// stop signal in the middle of a GRPO stage (rollouts, rewards, optimizer and
// RNG state all restored exactly).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";

// The number of events named `name` in a rank's trace file, which must be one JSON array.
int trace_events_named(const std::string& path, const std::string& name) {
  int n = 0;
  for (const auto& e : nlohmann::json::parse(read_text(path)))
    if (e.value("name", "") == name) ++n;
  return n;
}

void wait_for_lines(const std::string& metrics, size_t lines) {
  for (int i = 0; i < 1200 && read_metrics(metrics).size() < lines; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

TEST(ResumeE2E, KillDashNineWhileCheckpointingEveryStepLeavesAResumableRun) {
  // A checkpoint every step makes saving a large share of the run, so kills land mid-save.
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 30, batch: 16, "
                                    "lr: 3.0e-3}}]' --set run.checkpoint_every=1 --set run.keep_last=2"
                                    " --set run.eval_before_train=false";
  const std::string dir = scratch_dir("kill9");
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const std::string run = dir + "/killed";
  int kills = 0;
  for (size_t lines : {4u, 11u, 19u}) {
    const std::string resume = kills == 0 ? "" : " --resume";
    int pid = spawn_hpcrl("run " + cfg + " --out " + run + resume, 1, dir + "/log-" + std::to_string(kills));
    wait_for_lines(run + "/metrics.jsonl", lines);
    ::kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
    ++kills;
  }
  ASSERT_LT(read_metrics(run + "/metrics.jsonl").size(), read_metrics(dir + "/straight/metrics.jsonl").size())
      << "the last kill came after the run had finished";
  Proc resumed = run_hpcrl("run " + cfg + " --out " + run + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", run + "/metrics.jsonl");
  for (const auto& e : fs::recursive_directory_iterator(run + "/checkpoints"))
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << "left behind: " << e.path();
  // Each resume continued the trace after the last event the killed process completed: one
  // array, with the records of all four processes.
  EXPECT_EQ(trace_events_named(run + "/trace/rank-00000.json", "process_name"), 4);
}

TEST(ResumeE2E, StopInTheMiddleOfGrpoResumesExactly) {
  const std::string cfg =
      kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 10, batch: 16, lr: 3.0e-3}}, "
                "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 8, "
                "prompts: 8, group: 4, max_new_tokens: 32, temperature: 1.0, lr: 1.0e-4, "
                "kl: {coef: 0.01, estimator: k3}}}]' --set run.checkpoint_every=2 --set run.eval_before_train=false";
  const std::string dir = scratch_dir("grpo-resume");
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const std::string run = dir + "/stopped";
  int pid = spawn_hpcrl("run " + cfg + " --out " + run, 1, dir + "/stopped.log");
  // SFT writes 10 step lines and one eval line; stop a few GRPO iterations in.
  wait_for_lines(run + "/metrics.jsonl", 11 + 4);
  ::kill(pid, SIGUSR1);
  ASSERT_EQ(wait_exit(pid), 75) << run_shell("cat " + dir + "/stopped.log").output;
  auto partial = lines_with(read_metrics(run + "/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_GE(partial.size(), 1u) << "stopped before GRPO started";
  ASSERT_LT(partial.size(), 8u) << "stopped after GRPO ended";
  Proc resumed = run_hpcrl("run " + cfg + " --out " + run + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", run + "/metrics.jsonl");
  // The stopped process's spans stay in the trace, the resumed one's follow: SFT's 10 steps ran
  // only before the stop (the resume skips the finished stage).
  const std::string trace = run + "/trace/rank-00000.json";
  EXPECT_EQ(trace_events_named(trace, "sft/step"), 10);
  EXPECT_EQ(trace_events_named(trace, "process_name"), 2);
}
