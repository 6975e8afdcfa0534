// Nothing a user does loses their work (docs/reliability.md): --force replaces only an hpcrl
// run that holds nothing else and none of the run's inputs, never the working directory;
// every spelling of --out names one directory and a failed start leaves no staging folder;
// one job per run directory (run.lock); a resume that redoes a stage redoes the stages after
// it instead of dropping their metrics; a stop signal during start-up exits 75.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
// SFT alone, 2 steps: a finished run in a few seconds.
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 2, batch: 4}}]'" +
                         " --set run.eval_before_train=false --set run.eval_sampling.prompts=4";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Every name in `dir` that contains ".tmp-" (a staging folder or file left behind).
std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(e.path().string());
  return found;
}
}  // namespace

TEST(RunSafetyE2E, ForceRefusesADirectoryThatIsNotAnHpcrlRun) {
  const std::string dir = scratch_dir("force-user-dir");
  fs::create_directories(dir + "/thesis");
  write(dir + "/thesis/chapter1.tex", "precious");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/thesis --force");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "is not an hpcrl run directory (no config.resolved.yaml)")) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/thesis/chapter1.tex"));
  EXPECT_TRUE(leftovers(dir).empty());
}

TEST(RunSafetyE2E, ForceRefusesARunThatHoldsAFileHpcrlDidNotWrite) {
  const std::string dir = scratch_dir("force-extra-file");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  write(dir + "/run/notes.txt", "my analysis");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --force");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "holds notes.txt, which hpcrl did not write")) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/run/notes.txt"));
}

TEST(RunSafetyE2E, ForceRefusesTheWorkingDirectoryHoldingThePipeline) {
  const std::string dir = scratch_dir("force-cwd");
  fs::copy_file(kConfig, dir + "/p.yaml");
  // The run's own directory as the working directory, --out "$PWD": the pipeline file is inside.
  Proc p = run_shell("cd " + dir + " && " + std::string(HPCRL_BINARY) + " run p.yaml --set run.eval_before_train=false --out " +
                     dir + " --force 2>&1");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "is the working directory or holds it")) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/p.yaml"));
  EXPECT_TRUE(leftovers(dir).empty());
  EXPECT_TRUE(leftovers(fs::path(dir).parent_path().string()).empty());
}

TEST(RunSafetyE2E, ForceRefusesARunDirectoryHoldingTheRunsOwnInput) {
  const std::string dir = scratch_dir("force-input");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  // Its saved config as the pipeline of a new run into the same directory.
  Proc p = run_hpcrl("run " + dir + "/run/config.resolved.yaml --out " + dir + "/run --force");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "holds " + dir + "/run/config.resolved.yaml, which this run reads")) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/run/metrics.jsonl"));
}

TEST(RunSafetyE2E, ATrailingSlashNamesTheSameDirectoryAndLeavesNoStagingFolder) {
  const std::string dir = scratch_dir("trailing-slash");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run/");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/run/metrics.jsonl"));
  EXPECT_TRUE(leftovers(dir).empty());
  EXPECT_TRUE(leftovers(dir + "/run").empty());
  // --force through another spelling of the same directory replaces it in place.
  Proc again = run_hpcrl("run " + kSft + " --out " + dir + "/run/./ --force");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(leftovers(dir + "/run").empty());
}

TEST(RunSafetyE2E, ADotDotThatNamesTheParentOfRunsIsRefused) {
  const std::string dir = scratch_dir("dotdot");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/runs/base").exit_code, 0);
  // runs/base/.. is runs/: not an hpcrl run (it holds base/).
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/runs/base/.. --force");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "--force: " + dir + "/runs is not an hpcrl run directory")) << p.output;
  EXPECT_TRUE(fs::exists(dir + "/runs/base/metrics.jsonl"));
  EXPECT_TRUE(leftovers(dir).empty());
}

TEST(RunSafetyE2E, ADanglingSymlinkIsRefusedNamingItsTarget) {
  const std::string dir = scratch_dir("dangling");
  fs::create_symlink(dir + "/nowhere", dir + "/link");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/link");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/link is a symlink to " + dir + "/nowhere, which does not exist")) << p.output;
  EXPECT_TRUE(leftovers(dir).empty());
}

TEST(RunSafetyE2E, AnEmptyOutIsRefused) {
  Proc p = run_hpcrl("run " + kSft + " --out ''");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "--out \"\" names no directory")) << p.output;
}

TEST(RunSafetyE2E, ARunDirectoryInUseIsRefusedToForceAndResume) {
  const std::string dir = scratch_dir("locked");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  // flock(1) holds the lock as a running job's rank 0 would, for the two runs below.
  const std::string hold = "flock -o -n " + dir + "/run/run.lock sleep 30 & holder=$!; sleep 0.5; ";
  const std::string release = "; rc=$?; kill $holder; exit $rc";
  Proc force = run_shell(hold + std::string(HPCRL_BINARY) + " run " + kSft + " --out " + dir + "/run --force 2>&1" + release);
  EXPECT_EQ(force.exit_code, 2) << force.output;
  EXPECT_TRUE(has(force.output, "is in use by another job")) << force.output;
  Proc resume = run_shell(hold + std::string(HPCRL_BINARY) + " run " + kSft + " --out " + dir + "/run --resume 2>&1" + release);
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_TRUE(has(resume.output, "is in use by another job")) << resume.output;
  EXPECT_TRUE(fs::exists(dir + "/run/metrics.jsonl"));
}

TEST(RunSafetyE2E, ALockLeftByADeadProcessOnThisHostIsTaken) {
  const std::string dir = scratch_dir("stale-lock");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  write(dir + "/run/run.lock", std::string("host ") + host + "\npid 999999999\nsince 2026-01-01T00:00:00Z\n");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, "was left by pid 999999999 on host " + std::string(host) + " since 2026-01-01T00:00:00Z, "
                            "which is no longer running")) << p.output;
  EXPECT_EQ(read_text(dir + "/run/run.lock"), "") << "a job that ends releases the lock";
}

TEST(RunSafetyE2E, ALockFromAnotherHostIsReportedWithHowToClearIt) {
  const std::string dir = scratch_dir("remote-lock");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  write(dir + "/run/run.lock", "host nid001234\npid 4242\njob 77\nsince 2026-01-01T00:00:00Z\n");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "is locked by pid 4242 on host nid001234 (Slurm job 77)")) << p.output;
  EXPECT_TRUE(has(p.output, "If that job has ended, delete " + dir + "/run/run.lock")) << p.output;
}

// SFT then GRPO finished; SFT's final checkpoint damaged: the resume redoes SFT's last steps
// from the older checkpoint, and GRPO — which started from SFT's result — runs again, so
// metrics.jsonl ends with every GRPO line, equal to the uninterrupted run's (deterministic).
TEST(RunSafetyE2E, RedoingAStagesTailRunsTheLaterStagesAgainAndKeepsTheirLines) {
  const std::string dir = scratch_dir("redo-tail");
  const std::string two = kConfig + " --set run.eval_before_train=false --set run.eval_sampling.prompts=4" +
                          " --set run.checkpoint_every=2 --set run.keep_last=3" +
                          " --set 'stages=[{sft: {model: policy, data: arith, steps: 4, batch: 4}}, " +
                          "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 2, " +
                          "prompts: 2, group: 2, max_new_tokens: 8}}]'";
  ASSERT_EQ(run_hpcrl("run " + two + " --out " + dir + "/straight").exit_code, 0);
  ASSERT_EQ(run_hpcrl("run " + two + " --out " + dir + "/run").exit_code, 0);
  // Damage SFT's final checkpoint (step 4): the resume falls back to step 2.
  std::ofstream(dir + "/run/checkpoints/00-sft/step-000004/policy/model.safetensors",
                std::ios::binary | std::ios::app) << "damage";
  Proc p = run_hpcrl("run " + two + " --out " + dir + "/run --resume");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, "stage 1 (grpo) had run before this resume, but an earlier stage has just run again"))
      << p.output;
  EXPECT_FALSE(has(p.output, "(done before resume)")) << p.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean").size(), 2u);
}

// Before, only the row count was compared: other rows of the same number resumed silently.
TEST(RunSafetyE2E, ResumingOnOtherDataOfTheSameSizeIsRefused) {
  const std::string dir = scratch_dir("other-data");
  auto rows = [&](const std::string& answer) {
    std::ofstream f(dir + "/rows.jsonl");
    for (int i = 0; i < 8; ++i) f << "{\"question\": \"" << i << "+1\", \"answer\": \"#### " << answer << "\"}\n";
  };
  rows("1");
  const std::string args = "run " + kConfig + " --set 'data.rows={jsonl: {path: " + dir + "/rows.jsonl}}'" +
                           " --set 'stages=[{sft: {model: policy, data: rows, steps: 4, batch: 2}}]'" +
                           " --set run.eval_before_train=false --set run.checkpoint_every=2 --out " + dir + "/run";
  ASSERT_EQ(run_hpcrl(args).exit_code, 0);
  back_to_checkpoint(dir + "/run", "00-sft", 2);
  rows("2");  // the same 8 rows in number, other answers
  Proc p = run_hpcrl(args + " --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "the data changed since this checkpoint: the same 8 examples in number, but other ones"))
      << p.output;
}

TEST(RunSafetyE2E, AStepWithoutStateJsonIsSkippedWithAWarning) {
  const std::string dir = scratch_dir("no-state");
  const std::string args = kSft + " --set run.checkpoint_every=1 --set run.keep_last=3 --out " + dir + "/run";
  ASSERT_EQ(run_hpcrl("run " + args).exit_code, 0);
  back_to_checkpoint(dir + "/run", "00-sft", 2);
  fs::remove(dir + "/run/checkpoints/00-sft/step-000002/state.json");
  Proc p = run_hpcrl("run " + args + " --resume");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/run/checkpoints/00-sft/step-000002 has no state.json, so it is not a checkpoint "
                            "that can be resumed from; skipping it")) << p.output;
}
