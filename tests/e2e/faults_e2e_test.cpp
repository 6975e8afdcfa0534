// End-to-end: faults a cluster injects, for real, each with its outcome, exit
// code and message — a rank killed or stopped in the middle of GRPO, a
// checkpoint that hits a file-size limit, non-finite gradients (on_nonfinite),
// and SIGTERM sent to mpirun itself (slurm/local-mpirun.sh).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 8, batch: 16, "
                                   "lr: 3.0e-3}}]' --set run.eval_before_train=false";
// A GRPO stage long enough to be interrupted: 40 iterations after a short SFT.
const std::string kLongGrpo =
    kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 4, batch: 16, lr: 3.0e-3}}, "
              "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 40, "
              "prompts: 8, group: 4, max_new_tokens: 32, temperature: 1.0, lr: 1.0e-4, "
              "kl: {coef: 0.01, estimator: k3}}}]' --set run.eval_before_train=false";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Polls until `metrics` has `lines` lines of `stage` (false after 120 s).
bool wait_for_stage_lines(const std::string& metrics, const std::string& stage, size_t lines) {
  for (int i = 0; i < 1200; ++i) {
    if (lines_with(read_metrics(metrics), stage, "loss").size() >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The pid of world rank `rank`, from its log line "rank R of N: ..., pid P".
int rank_pid(const std::string& run_dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "/logs/rank-%05d.log", rank);
  for (int i = 0; i < 600; ++i) {
    std::smatch m;
    const std::string log = read_text(run_dir + name);
    if (std::regex_search(log, m, std::regex("rank \\d+ of \\d+: .*pid (\\d+)"))) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

// Running (a zombie no longer counts: it has exited, only nobody reaped it yet).
bool alive(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Whether `pid` is still running `limit_s` after `t0`: mpirun can return while a
// rank it killed is still being torn down, so each rank gets the same deadline.
bool alive_after(int pid, Clock::time_point t0, double limit_s) {
  while (alive(pid) && std::chrono::duration<double>(Clock::now() - t0).count() < limit_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return alive(pid);
}

// Waits for child `pid` at most `limit_s`; -1 when it was still running (then killed).
int wait_exit_within(int pid, double limit_s) {
  const auto t0 = Clock::now();
  int status = 0;
  while (seconds_since(t0) < limit_s) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::string file_bytes(const std::string& path) { return read_text(path); }
}  // namespace

// --- ranks that die or stall ------------------------------------------------

TEST(FaultsE2E, RankKilledMidGrpoEndsEveryRankWithinThirtySecondsNamingIt) {
  const std::string dir = scratch_dir("kill-rank");
  const int mpirun = spawn_hpcrl("run " + kLongGrpo + " --out " + dir + "/run", 4, dir + "/log");
  ASSERT_TRUE(wait_for_stage_lines(dir + "/run/metrics.jsonl", "grpo", 2)) << read_text(dir + "/log");
  std::vector<int> pids;
  for (int r = 0; r < 4; ++r) pids.push_back(rank_pid(dir + "/run", r));
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  const auto t0 = Clock::now();
  const int rc = wait_exit_within(mpirun, 30);
  const std::string log = read_text(dir + "/log");
  EXPECT_NE(rc, -1) << "still running 30 s after rank 2 was killed:\n" << log;
  EXPECT_NE(rc, 0);
  EXPECT_LT(seconds_since(t0), 30.0);
  std::printf("the job ended %.1f s after rank 2 was killed (docs/reliability.md)\n", seconds_since(t0));
  for (int r : {0, 1, 3}) EXPECT_FALSE(alive_after(pids[r], t0, 30.0)) << "rank " << r << " outlived the 30 s";
  EXPECT_TRUE(std::regex_search(log, std::regex("rank 2 with PID \\d+ on node \\S+ exited on signal 9"))) << log;
}

TEST(FaultsE2E, StalledRankFiresTheWatchdogNamingTheCallAndTheRank) {
  // SIGSTOP leaves rank 2 alive but silent: MPI would wait forever; the watchdog
  // (run.comm_timeout_s = 5) ends the job naming the collective, its group and rank 2.
  const std::string dir = scratch_dir("stall-rank");
  const int mpirun =
      spawn_hpcrl("run " + kLongGrpo + " --set run.comm_timeout_s=5 --out " + dir + "/run", 4, dir + "/log");
  ASSERT_TRUE(wait_for_stage_lines(dir + "/run/metrics.jsonl", "grpo", 2)) << read_text(dir + "/log");
  const int stalled = rank_pid(dir + "/run", 2);
  ASSERT_EQ(::kill(stalled, SIGSTOP), 0);
  const auto t0 = Clock::now();
  const int rc = wait_exit_within(mpirun, 60);
  const double took = seconds_since(t0);
  ::kill(stalled, SIGKILL);  // whatever happened, leave nothing stopped behind
  const std::string log = read_text(dir + "/log");
  EXPECT_NE(rc, -1) << "still running 60 s after rank 2 stalled:\n" << log;
  EXPECT_NE(rc, 0);
  EXPECT_GE(took, 5.0) << "fired before the timeout";
  EXPECT_TRUE(contains(log, "communication watchdog: ")) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("(all_reduce|all_gather|broadcast|barrier|reduce_scatter|all_to_all) "
                                                "#\\d+ on group '[^']+' \\(world ranks [0-9,-]+\\) has waited")))
      << log;
  EXPECT_TRUE(contains(log, "rank(s) 2 did not arrive")) << log;
  EXPECT_TRUE(contains(log, "rank 2: no answer within 5 s (stopped, e.g. SIGSTOP, or dead)")) << log;
  EXPECT_TRUE(contains(log, "run.comm_timeout_s = 5")) << log;
}

// --- a full file system while checkpointing -----------------------------------

TEST(FaultsE2E, CheckpointPastAFileSizeLimitNamesTheFileAndKeepsThePreviousOne) {
  // The run stops at step 4 (checkpoint written); resumed under a 256 KiB file-size
  // limit (prlimit: what a full disk or a quota does to a large write), the next
  // checkpoint fails with the file, the bytes it needs and the intact previous step;
  // resumed without the limit, the run ends as if nothing had happened.
  const std::string cfg = kSft + " --set stages.0.sft.steps=8 --set run.checkpoint_every=4 --set trace.chrome=false";
  const std::string dir = scratch_dir("fsize");
  Proc straight = run_hpcrl("run " + cfg + " --out " + dir + "/straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  Proc first = run_hpcrl("run " + cfg + " --out " + dir + "/run", 1, "HPCRL_TEST_STOP_SIGNAL=step:5");
  ASSERT_EQ(first.exit_code, 75) << first.output;
  const std::string kept = dir + "/run/checkpoints/00-sft/step-000004";
  ASSERT_TRUE(fs::exists(kept + "/state.json"));
  const std::string weights_before = file_bytes(kept + "/policy/model.safetensors");
  ASSERT_GT(weights_before.size(), 256u * 1024) << "the limit must be below one checkpoint file";

  // The limit applies to the rank only, under mpirun: a singleton's MPI_Init starts
  // Open MPI's daemon, which inherits the limit and fails creating its larger files.
  Proc limited = run_shell("cd " HPCRL_SOURCE_DIR " && env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                           "mpirun -np 1 --oversubscribe --bind-to none prlimit --fsize=262144 " HPCRL_BINARY " run " +
                           cfg + " --out " + dir + "/run --resume");
  EXPECT_EQ(limited.exit_code, 1) << limited.output;
  EXPECT_TRUE(contains(limited.output, "checkpoint of step 8 not written: cannot write " + dir +
                                           "/run/checkpoints/00-sft/step-000008.partial/policy/"))
      << limited.output;
  EXPECT_TRUE(std::regex_search(limited.output, std::regex("File too large after \\d+ of the \\d+ bytes it needs")))
      << limited.output;
  EXPECT_TRUE(contains(limited.output, "a file-size limit (ulimit -f) stops it")) << limited.output;
  EXPECT_TRUE(contains(limited.output, "The previous one, " + kept + ", is intact: --resume continues from it"))
      << limited.output;
  EXPECT_FALSE(fs::exists(dir + "/run/checkpoints/00-sft/step-000008"));
  EXPECT_EQ(file_bytes(kept + "/policy/model.safetensors"), weights_before);

  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
}

// --- non-finite gradients -----------------------------------------------------

TEST(FaultsE2E, NonFiniteGradientStopsTheRunNamingStageStepRankAndTensor) {
  const std::string dir = scratch_dir("nan-stop");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run", 1, "HPCRL_TEST_NONFINITE_GRAD=sft:3");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(contains(p.output, "stage sft step 3: the gradient norm of role 'policy' is nan on rank 0")) << p.output;
  EXPECT_TRUE(std::regex_search(p.output, std::regex("first non-finite: the gradient of [a-z_.0-9]+\\.weight")))
      << p.output;
  EXPECT_TRUE(contains(p.output, "(or set on_nonfinite: skip_step to skip such steps)")) << p.output;
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss").size(), 3u);
}

TEST(FaultsE2E, SkipStepLeavesTheWeightsOfTheSkippedStepUnchangedAndCountsIt) {
  // A checkpoint after every step: the weights after step 4 (0-based step 3, skipped)
  // are those after step 3, byte for byte; the steps around it do change them.
  const std::string cfg = kSft + " --set stages.0.sft.on_nonfinite=skip_step --set run.checkpoint_every=1 "
                                 "--set run.keep_last=10";
  const std::string dir = scratch_dir("nan-skip");
  Proc p = run_hpcrl("run " + cfg + " --out " + dir + "/run", 1, "HPCRL_TEST_NONFINITE_GRAD=sft:3");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(contains(p.output, "on_nonfinite: skip_step: this update is skipped (1 in a row, at most 3)"))
      << p.output;
  auto weights = [&](int step) {
    char name[64];
    std::snprintf(name, sizeof name, "/run/checkpoints/00-sft/step-%06d/policy/model.safetensors", step);
    return file_bytes(dir + name);
  };
  EXPECT_NE(weights(2), weights(3));
  EXPECT_EQ(weights(3), weights(4)) << "the skipped step changed the weights";
  EXPECT_NE(weights(4), weights(5));
  auto lines = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[2]["nonfinite/skipped_steps"], 0.0);
  EXPECT_EQ(lines[3]["nonfinite/skipped_steps"], 1.0);  // metrics step 4 = 0-based step 3
  EXPECT_EQ(lines[7]["nonfinite/skipped_steps"], 1.0);
  EXPECT_TRUE(lines[3]["grad_norm"].is_null()) << "NaN is written as null";
}

TEST(FaultsE2E, SkipStepStopsAfterTooManySkipsInARow) {
  const std::string cfg = kSft + " --set stages.0.sft.on_nonfinite=skip_step --set stages.0.sft.max_consecutive_skips=2";
  const std::string dir = scratch_dir("nan-skips");
  Proc p = run_hpcrl("run " + cfg + " --out " + dir + "/run", 1, "HPCRL_TEST_NONFINITE_GRAD=sft:2,3,4");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(contains(p.output, "stage sft step 4: the gradient norm of role 'policy' is nan on rank 0")) << p.output;
  EXPECT_TRUE(contains(p.output, "after 2 skipped steps in a row (on_nonfinite: skip_step, max_consecutive_skips: 2)"))
      << p.output;
}

TEST(FaultsE2E, NonFiniteGradientOnOneRankIsSkippedByEveryRank) {
  // dp = 2, the NaN on rank 1 only: the ranks agree, so both skip (their replicas
  // stay equal and the run continues), and the count reaches the metrics.
  const std::string cfg = kSft + " --set stages.0.sft.on_nonfinite=skip_step";
  const std::string dir = scratch_dir("nan-skip-dp2");
  Proc p = run_hpcrl("run " + cfg + " --out " + dir + "/run", 2, "HPCRL_TEST_NONFINITE_GRAD=sft:5@1");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto lines = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[5]["nonfinite/skipped_steps"], 1.0);
  EXPECT_TRUE(contains(read_text(dir + "/run/logs/rank-00000.log"),
                       "this rank's gradients are finite: the non-finite values are on another rank of the role"));
  EXPECT_TRUE(std::regex_search(read_text(dir + "/run/logs/rank-00001.log"),
                                std::regex("rank 1 \\(first non-finite: the gradient of ")));
}

TEST(FaultsE2E, WithZero1And2ASkippedStepLeavesTheShardsInStepWithPlainDataParallel) {
  // ZeRO-1/2: each rank steps its own shard of the optimizer and all-gathers the
  // parameters, so a rank that stepped while its partner skipped would mix two
  // versions. The skip is agreed before any shard steps: the curve equals plain
  // dp's with the same NaN (here in rank 1's reduced shard), step for step.
  const std::string cfg = kSft + " --set stages.0.sft.on_nonfinite=skip_step";
  const std::string dir = scratch_dir("nan-skip-zero");
  Proc plain = run_hpcrl("run " + cfg + " --out " + dir + "/plain", 2, "HPCRL_TEST_NONFINITE_GRAD=sft:5@1");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto a = lines_with(read_metrics(dir + "/plain/metrics.jsonl"), "sft", "loss");
  for (const std::string zero : {"1", "2"}) {
    Proc sharded = run_hpcrl("run " + cfg + " --set models.policy.optim.zero=" + zero + " --out " + dir + "/zero" +
                             zero, 2, "HPCRL_TEST_NONFINITE_GRAD=sft:5@1");
    ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
    auto b = lines_with(read_metrics(dir + "/zero" + zero + "/metrics.jsonl"), "sft", "loss");
    ASSERT_EQ(b.size(), 8u) << "zero " << zero;
    EXPECT_EQ(b[5]["nonfinite/skipped_steps"], 1.0) << "zero " << zero;
    expect_close_curves(a, b, "loss", 1e-5);
  }
}

TEST(FaultsE2E, MaxConsecutiveSkipsWithoutSkipStepIsRefused) {
  Proc p = run_hpcrl("validate " + kSft + " --set stages.0.sft.max_consecutive_skips=2");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(contains(p.output, "applies only to on_nonfinite: skip_step")) << p.output;
}

// --- SIGTERM to mpirun itself ---------------------------------------------------

TEST(FaultsE2E, SigtermToMpirunCheckpointsAndExits75UnderTheWrapper) {
  // Open MPI 4.1's mpirun answers SIGTERM by waiting odls_base_sigkill_timeout
  // seconds, SIGTERMing its ranks, waiting as long again, SIGKILLing them and exiting
  // 1 whatever they returned. slurm/local-mpirun.sh sets that timeout to
  // HPCRL_STOP_GRACE_S (3 s here) and reports the exit code rank 0 recorded: 75,
  // with the checkpoint. 200 iterations (about 15 s) outlast the 3 s wait.
  const std::string grpo = kConfig +
                           " --set 'stages=[{sft: {model: policy, data: arith, steps: 4, batch: 16, lr: 3.0e-3}}, "
                           "{grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 200, "
                           "prompts: 8, group: 4, max_new_tokens: 32, temperature: 1.0, lr: 1.0e-4, "
                           "kl: {coef: 0.01, estimator: k3}}}]' --set run.eval_before_train=false";
  const std::string dir = scratch_dir("term-mpirun");
  const std::string args = "2 " + grpo + " --out " + dir + "/run";
  Proc straight = run_hpcrl("run " + grpo + " --out " + dir + "/straight", 2);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  pid_t wrapper = fork();
  if (wrapper == 0) {
    const std::string cmd = "cd " HPCRL_SOURCE_DIR " && exec env HPCRL=" HPCRL_BINARY
                            " HPCRL_STOP_GRACE_S=3 bash slurm/local-mpirun.sh " + args + " >" + dir + "/log 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(wait_for_stage_lines(dir + "/run/metrics.jsonl", "grpo", 3)) << read_text(dir + "/log");
  Proc mpirun = run_shell("pgrep -P " + std::to_string(wrapper) + " -x mpirun");
  ASSERT_FALSE(mpirun.output.empty()) << "no mpirun under the wrapper";
  ASSERT_EQ(::kill(std::stoi(mpirun.output), SIGTERM), 0);
  const int rc = wait_exit_within(wrapper, 60);
  const std::string log = read_text(dir + "/log");
  ASSERT_EQ(rc, 75) << log;
  EXPECT_TRUE(contains(log, "SIGTERM received")) << log;
  EXPECT_TRUE(contains(log, "the ranks checkpointed and stopped resumably (mpirun exited 1): exit 75")) << log;
  EXPECT_LT(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean").size(), 200u);
  Proc resumed = run_shell("cd " HPCRL_SOURCE_DIR " && HPCRL=" HPCRL_BINARY " bash slurm/local-mpirun.sh " + args +
                           " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_metrics(dir + "/straight/metrics.jsonl", dir + "/run/metrics.jsonl");
}
