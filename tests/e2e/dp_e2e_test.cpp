// End-to-end under mpirun: data parallelism follows the single-rank run, ZeRO-1,
// 2 and 3 follow plain dp, resume exactly at their own dp size and, recut, at
// another (not at another tp), and a
// stop signal delivered to one rank stops every rank resumably.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";

using Lines = std::vector<nlohmann::json>;

// `b` has `steps` lines whose loss (1e-5) and gradient norm follow `a`'s.
void expect_same_curve(const Lines& a, const Lines& b, size_t steps, double norm_tolerance = 1e-5) {
  ASSERT_EQ(b.size(), steps);
  expect_close_curves(a, b, "loss", 1e-5);
  expect_close_curves(a, b, "grad_norm", norm_tolerance);
}

TEST(DataParallelE2E, SftDp2FollowsDp1) {
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 12, batch: 16, lr: 3.0e-3, "
                                    "micro_batch: 4}}]' --set run.eval_before_train=false";
  auto [a, b] = run_twice(cfg, "dp-sft", 1, "", 2, "sft", "loss");
  expect_same_curve(a, b, 12, 1e-4);
}

// ZeRO stage `zero` at dp 2: the SFT curve of plain dp 2 (micro-batches of 4:
// ZeRO-2 reduces each of the 2 per rank during the backward), an exact resume
// at dp 2 from the step-4 checkpoint, resumes at each of `other_dp` that recut
// the optimizer shards and follow the dp 2 curve, and a refusal at tp 2 naming the layout.
void expect_zero_follows_plain_dp2_and_resumes(int zero, const std::vector<int>& other_dp) {
  // ZeRO-2 with 0.25 MiB buckets: tiny-2l's 1.7 MB of fp32 gradients are reduced in nine.
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 8, batch: 16, lr: 3.0e-3, "
                                    "micro_batch: 4}}]' --set run.eval_before_train=false --set run.checkpoint_every=4"
                                    " --set run.keep_last=4" +
                          (zero == 2 ? " --set models.policy.optim.bucket_mb=0.25" : "");
  const std::string dir = scratch_dir("dp-zero" + std::to_string(zero));
  const std::string with_zero = cfg + " --set models.policy.optim.zero=" + std::to_string(zero) + " --out " + dir +
                                "/zero";
  Proc plain = run_hpcrl("run " + cfg + " --out " + dir + "/plain", 2);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  Proc sharded = run_hpcrl("run " + with_zero, 2);
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  auto a = lines_with(read_metrics(dir + "/plain/metrics.jsonl"), "sft", "loss");
  auto b = lines_with(read_metrics(dir + "/zero/metrics.jsonl"), "sft", "loss");
  ASSERT_NO_FATAL_FAILURE(expect_same_curve(a, b, 8));

  ASSERT_TRUE(std::filesystem::exists(dir + "/zero/checkpoints/00-sft/step-000004/policy/optimizer-rank-00001.safetensors"));
  ASSERT_NO_FATAL_FAILURE(back_to_checkpoint(dir + "/zero", "00-sft", 4));
  Proc tp2 = run_hpcrl("run " + with_zero + " --set models.policy.parallel.tp=2 --resume", 2);
  EXPECT_EQ(tp2.exit_code, 2) << tp2.output;
  EXPECT_NE(tp2.output.find("models.policy.parallel.tp (saved 1, now 2)"), std::string::npos) << tp2.output;
  if (zero == 1) {
    // Past a hand-edited resolved config, the checkpoint's own layout still refuses the tp change.
    const std::string resolved = dir + "/zero/config.resolved.yaml", text = read_text(resolved);
    std::string edited = text;
    for (int k = 0; k < 2; ++k) edited.replace(edited.find("tp: 1"), 5, "tp: 2");  // policy.parallel, policy.rollout
    std::ofstream(resolved) << edited;
    Proc layout = run_hpcrl("run " + with_zero + " --set models.policy.parallel.tp=2 --resume", 2);
    EXPECT_EQ(layout.exit_code, 2) << layout.output;
    EXPECT_NE(layout.output.find("' was saved with layout {"), std::string::npos) << layout.output;
    EXPECT_NE(layout.output.find("resume with the same tp, sp, ep, pp and optim.zero setting, only dp may change"),
              std::string::npos) << layout.output;
    EXPECT_EQ(read_metrics(dir + "/zero/metrics.jsonl").size(), read_metrics(dir + "/plain/metrics.jsonl").size())
        << "the refused resume changed metrics.jsonl";
    std::ofstream(resolved) << text;
  }
  expect_exact_resume(with_zero, dir + "/zero", "00-sft", 4, 2);

  // At another dp the shards are recut: the same state, so the dp 2 curve to rounding
  // (measured: 3e-7 relative; without the optimizer state the loss moves by 0.18).
  for (int dp : other_dp) {
    SCOPED_TRACE("resumed at dp " + std::to_string(dp));
    ASSERT_NO_FATAL_FAILURE(back_to_checkpoint(dir + "/zero", "00-sft", 4));
    Proc other = run_hpcrl("run " + with_zero + " --resume", dp);
    ASSERT_EQ(other.exit_code, 0) << other.output;
    EXPECT_NE(other.output.find("role policy: optimizer state saved at dp 2 recut for dp " + std::to_string(dp)),
              std::string::npos) << other.output;
    auto c = lines_with(read_metrics(dir + "/zero/metrics.jsonl"), "sft", "loss");
    ASSERT_NO_FATAL_FAILURE(expect_same_curve(b, c, 8, 1e-5));
  }
}

}  // namespace

TEST(DataParallelE2E, SftZero1Dp2FollowsPlainDp2AndResumesAtDp2AndDp1) {
  expect_zero_follows_plain_dp2_and_resumes(1, {1});
}

TEST(DataParallelE2E, SftZero2Dp2FollowsPlainDp2AndResumesAtDp2Dp1AndDp4) {
  expect_zero_follows_plain_dp2_and_resumes(2, {1, 4});
}

// ZeRO-3 also shards the weights: the checkpoint's HF model is gathered from
// the shards, and the resumed run loads it back into them.
TEST(DataParallelE2E, SftZero3Dp2FollowsPlainDp2AndResumesAtDp2AndDp1) {
  expect_zero_follows_plain_dp2_and_resumes(3, {1});
}

TEST(DataParallelE2E, GrpoDp2MatchesDp1) {
  const std::string cfg = kConfig +
                          " --set 'stages=[{grpo: {policy: policy, reference: reference, reward: math, data: arith, "
                          "iterations: 2, prompts: 8, group: 4, max_new_tokens: 24, lr: 1.0e-4}}]'"
                          " --set run.eval_before_train=false";
  auto [a, b] = run_twice(cfg, "dp-grpo", 1, "", 2, "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  // Iteration 1 samples from identical weights with layout-independent seeds: same rollouts.
  expect_same_rollouts({a[0]}, {b[0]}, {{"loss", 1e-5}, {"kl", 1e-4}});
}

namespace {
// 4 ranks, tp 2: each tp rank's shards of the weights are sharded again over its dp pair,
// and the global norm adds the tp shards' parts as the plain path does.
void expect_zero_dp2_tp2_follows_plain(int zero) {
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 6, batch: 16, lr: 3.0e-3, "
                                    "micro_batch: 4}}]' --set run.eval_before_train=false"
                                    " --set models.policy.parallel.tp=2 --set models.policy.optim.bucket_mb=0.25";
  auto [a, b] = run_twice(cfg, "dp-tp-zero" + std::to_string(zero), 4,
                          " --set models.policy.optim.zero=" + std::to_string(zero), 4, "sft", "loss");
  expect_same_curve(a, b, 6);
}

// The policy's update reduce-scatters its gradients during each micro-batch's backward (ZeRO-3 also
// gathers its weights per layer, and whole for the engine); the weights stay within rounding of plain
// dp's, so every iteration samples the same.
void expect_zero_grpo_follows_plain_dp2(int zero) {
  const std::string cfg = kConfig +
                          " --set 'stages=[{grpo: {policy: policy, reference: reference, reward: math, data: arith, "
                          "iterations: 3, prompts: 8, group: 4, max_new_tokens: 24, lr: 1.0e-4, micro_batch: 4}}]'"
                          " --set run.eval_before_train=false --set models.policy.optim.bucket_mb=0.25";
  auto [a, b] = run_twice(cfg, "dp-grpo-zero" + std::to_string(zero), 2,
                          " --set models.policy.optim.zero=" + std::to_string(zero), 2, "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  expect_same_rollouts(a, b, {{"loss", 1e-5}, {"kl", 1e-4}, {"grad_norm", 1e-4}});
}
}  // namespace

TEST(DataParallelE2E, SftZero2Dp2Tp2FollowsPlainDp2Tp2) { expect_zero_dp2_tp2_follows_plain(2); }
TEST(DataParallelE2E, SftZero3Dp2Tp2FollowsPlainDp2Tp2) { expect_zero_dp2_tp2_follows_plain(3); }
TEST(DataParallelE2E, GrpoZero2Dp2FollowsPlainDp2) { expect_zero_grpo_follows_plain_dp2(2); }
TEST(DataParallelE2E, GrpoZero3Dp2FollowsPlainDp2) { expect_zero_grpo_follows_plain_dp2(3); }

// Sequence parallelism: the sp ranks hold the same weights, so ZeRO-3 shards
// them over the dp·sp group, while the attention's all-to-alls run on sp.
TEST(DataParallelE2E, SftZero3Sp2FollowsPlainSp2) {
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 6, batch: 16, lr: 3.0e-3, "
                                    "micro_batch: 4}}]' --set run.eval_before_train=false"
                                    " --set models.policy.parallel.sp=2";
  auto [a, b] = run_twice(cfg, "dp-sp-zero3", 2, " --set models.policy.optim.zero=3", 2, "sft", "loss");
  expect_same_curve(a, b, 6);
}

// PPO with the policy and its critic both ZeRO-3 (the critic's value head is in
// its outer unit): the rollouts, losses and values of plain dp 2.
TEST(DataParallelE2E, PpoZero3PolicyAndCriticFollowPlainDp2) {
  const std::string cfg = "tests/e2e/data/ppo_judge.yaml";
  auto [a, b] = run_twice(cfg, "dp-ppo-zero3", 2, " --set models.policy.optim.zero=3 --set models.critic.optim.zero=3", 2,
                          "ppo", "reward/mean");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  expect_same_rollouts(a, b, {{"loss", 1e-5}, {"kl", 1e-4}, {"critic/loss", 1e-5}, {"critic/values_mean", 1e-5}});
}

// Distillation with a ZeRO-3 student (the teacher is a frozen role, whole):
// the loss curve of plain dp 2.
TEST(DataParallelE2E, DistillZero3StudentFollowsPlainDp2) {
  const std::string cfg = kConfig + " --set 'stages=[{distill: {teacher: policy, student: student, data: arith, steps: 6, "
                                    "batch: 16, lr: 3.0e-3, top_k: 16, micro_batch: 4}}]' --set run.eval_before_train=false";
  auto [a, b] = run_twice(cfg, "dp-distill-zero3", 2, " --set models.student.optim.zero=3", 2, "distill", "loss");
  expect_same_curve(a, b, 6);
}

TEST(DataParallelE2E, Usr1ToOneRankStopsAllRanksWith75AndResumeCompletes) {
  const std::string cfg = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 40, batch: 16, "
                                    "lr: 3.0e-3}}]' --set run.eval_before_train=false";
  std::string dir = scratch_dir("dp-usr1");
  int pid = spawn_hpcrl("run " + cfg + " --out " + dir + "/run", 2, dir + "/log");
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (read_metrics(dir + "/run/metrics.jsonl").size() >= 4) break;
  }
  // Signal exactly one rank (a child of mpirun), not mpirun itself.
  Proc child = run_shell("pgrep -P " + std::to_string(pid) + " -f 'hpcrl run' | head -1");
  ASSERT_FALSE(child.output.empty()) << "no rank process found under mpirun pid " << pid;
  ASSERT_EQ(::kill(std::stoi(child.output), SIGUSR1), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(pid), 75) << run_shell("cat " + dir + "/log").output;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_LT(read_metrics(dir + "/run/metrics.jsonl").size(), 40u);
  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume", 2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss").size(), 40u);
}
