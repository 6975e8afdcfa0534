// End-to-end: the real `hpcrl run` on a tiny SFT → GRPO → distillation
// pipeline — run-directory contents, learning signals, refusal to overwrite,
// and an exact resume after a stop signal.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
}  // namespace

TEST(PipelineE2E, AllStagesRunLearnAndLeaveTheRunDirectory) {
  std::string out = scratch_dir("all") + "/run";
  Proc p = run_hpcrl("run " + kConfig + " --out " + out);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  for (const char* f : {"config.resolved.yaml", "metrics.jsonl", "trace/rank-00000.json", "trace/summary.md",
                        "trace/summary.csv", "logs/rank-00000.log", "checkpoints/00-sft/complete.json",
                        "checkpoints/00-sft/step-000040/policy/model.safetensors",
                        "checkpoints/00-sft/step-000040/policy/config.json",
                        "checkpoints/01-grpo/step-000003/state.json",
                        "checkpoints/02-distill/step-000020/student/model.safetensors"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;

  auto m = read_metrics(out + "/metrics.jsonl");
  auto sft_eval = lines_with(m, "sft", "eval/loss");
  ASSERT_EQ(sft_eval.size(), 2u);  // before training and at the end
  EXPECT_LT(sft_eval[1]["eval/loss"].get<double>(), 0.7 * sft_eval[0]["eval/loss"].get<double>());
  auto sft_loss = lines_with(m, "sft", "loss");
  ASSERT_EQ(sft_loss.size(), 40u);
  EXPECT_LT(sft_loss.back()["loss"].get<double>(), sft_loss.front()["loss"].get<double>());

  auto grpo = lines_with(m, "grpo", "reward/mean");
  ASSERT_EQ(grpo.size(), 3u);
  for (const auto& j : grpo)
    for (const char* k : {"loss", "kl", "entropy", "clip_frac", "grad_norm", "response_len/mean", "accuracy",
                          "seconds/rollout", "seconds/actor_update"})
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << j.dump();

  auto distill = lines_with(m, "distill", "loss");
  ASSERT_EQ(distill.size(), 20u);
  EXPECT_LT(distill.back()["loss"].get<double>(), distill.front()["loss"].get<double>());  // KL to the teacher falls

  EXPECT_NE(p.output.find("held-out accuracy"), std::string::npos) << p.output;
}

TEST(PipelineE2E, ExistingRunDirectoryIsNotOverwritten) {
  std::string out = scratch_dir("keep") + "/run";
  fs::create_directories(out);
  {
    std::ofstream(out + "/metrics.jsonl") << "precious\n";
  }
  Proc p = run_hpcrl("run " + kConfig + " --out " + out);
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find("already exists; pass --resume"), std::string::npos) << p.output;
  std::ifstream in(out + "/metrics.jsonl");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious");
}

TEST(PipelineE2E, StopSignalCheckpointsExits75AndResumeIsExact) {
  const std::string sft_only =
      kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 30, batch: 16, lr: 3.0e-3}}]'"
                " --set run.checkpoint_every=4";
  std::string dir = scratch_dir("resume");
  Proc ref = run_hpcrl("run " + sft_only + " --out " + dir + "/straight");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  int pid = spawn_hpcrl("run " + sft_only + " --out " + dir + "/stopped", 1, dir + "/stopped.log");
  // Signal once training is under way (a few steps written).
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (read_metrics(dir + "/stopped/metrics.jsonl").size() >= 6) break;
  }
  ::kill(pid, SIGUSR1);
  ASSERT_EQ(wait_exit(pid), 75) << run_shell("cat " + dir + "/stopped.log").output;
  // The hint is the whole command: a resume without the start's --set flags is refused.
  EXPECT_NE(run_shell("cat " + dir + "/stopped.log")
                .output.find("Continue with: hpcrl run tests/e2e/data/tiny.yaml --out " + dir + "/stopped --set "
                             "'stages=[{sft: {model: policy, data: arith, steps: 30, batch: 16, lr: 3.0e-3}}]' --set "
                             "run.checkpoint_every=4 --resume"),
            std::string::npos)
      << run_shell("cat " + dir + "/stopped.log").output;
  auto partial = read_metrics(dir + "/stopped/metrics.jsonl");
  ASSERT_LT(partial.size(), read_metrics(dir + "/straight/metrics.jsonl").size()) << "the run was not stopped early";

  Proc resumed = run_hpcrl("run " + sft_only + " --out " + dir + "/stopped --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto a = read_metrics(dir + "/straight/metrics.jsonl");
  auto b = read_metrics(dir + "/stopped/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(without_timing(a[i]), without_timing(b[i])) << "line " << i;
}

TEST(PipelineE2E, PpoTrainsTheCriticAndReportsItsMetrics) {
  const std::string cfg =
      kConfig + " --set 'models.critic={init: {from: policy}, head: value}'"
                " --set 'stages=[{sft: {model: policy, data: arith, steps: 30, batch: 32, lr: 3.0e-3}}, "
                "{ppo: {policy: policy, critic: critic, reference: reference, reward: math, data: arith, "
                "iterations: 4, prompts: 8, group: 2, max_new_tokens: 32, lr: 1.0e-4, critic_lr: 1.0e-3, "
                "kl: {coef: 0.01, in_reward: true}}}]'";
  std::string out = scratch_dir("ppo") + "/run";
  Proc p = run_hpcrl("run " + cfg + " --out " + out);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto ppo = lines_with(read_metrics(out + "/metrics.jsonl"), "ppo", "critic/loss");
  ASSERT_EQ(ppo.size(), 4u);
  for (const auto& j : ppo)
    for (const char* k : {"reward/mean", "kl", "clip_frac", "critic/clip_frac", "critic/values_mean",
                          "seconds/rollout", "seconds/actor_update"})
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << j.dump();
  EXPECT_LT(ppo.back()["critic/loss"].get<double>(), ppo.front()["critic/loss"].get<double>());
  EXPECT_TRUE(fs::exists(out + "/checkpoints/01-ppo/step-000004/critic/model.safetensors"));
}
