// End-to-end: `run.device` and `run.dtype` reach the models. bf16 parameters
// train through fp32 master weights; a CUDA build follows the CPU run on the
// GPU; a CPU-only build refuses `device: cuda` before creating anything.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
// SFT only, shortened: the stages after it are covered by pipeline_e2e_test.
const std::string kSftOnly =
    " --set stages.0.sft.steps=20 --set stages.1.grpo.iterations=1 --set stages.2.distill.steps=2";

std::vector<double> grpo_rewards(const std::string& run) {
  std::vector<double> out;
  for (const auto& j : lines_with(read_metrics(run + "/metrics.jsonl"), "grpo", "reward/mean"))
    out.push_back(j["reward/mean"].get<double>());
  return out;
}

// The GRPO rewards of kConfig + `args` with the default decode steps (DIR/dynamic) and with
// models.policy.rollout.decode_step = `step` (DIR/<step>); empty where a run failed (its output printed).
std::pair<std::vector<double>, std::vector<double>> rewards_without_and_with(const std::string& dir,
                                                                              const std::string& args,
                                                                              const std::string& step) {
  Proc dynamic = run_hpcrl("run " + kConfig + args + " --out " + dir + "/dynamic");
  EXPECT_EQ(dynamic.exit_code, 0) << dynamic.output;
  Proc other = run_hpcrl("run " + kConfig + args + " --set models.policy.rollout.decode_step=" + step + " --out " +
                         dir + "/" + step);
  EXPECT_EQ(other.exit_code, 0) << other.output;
  return {grpo_rewards(dir + "/dynamic"), grpo_rewards(dir + "/" + step)};
}

std::vector<double> sft_losses(const std::string& run) {
  std::vector<double> out;
  for (const auto& j : lines_with(read_metrics(run + "/metrics.jsonl"), "sft", "loss"))
    out.push_back(j["loss"].get<double>());
  return out;
}
}  // namespace

TEST(DeviceE2E, Bfloat16ParametersTrainAndStartWhereFloat32Starts) {
  const std::string dir = scratch_dir("bf16");
  Proc f32 = run_hpcrl("run " + kConfig + kSftOnly + " --out " + dir + "/f32");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  Proc bf16 = run_hpcrl("run " + kConfig + kSftOnly + " --set run.dtype=bfloat16 --out " + dir + "/bf16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("cpu bfloat16"), std::string::npos) << "the role log line names the dtype";
  auto a = sft_losses(dir + "/f32"), b = sft_losses(dir + "/bf16");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  // Same initial weights rounded to bf16 (8 bits of mantissa): the first loss agrees to ~1 %.
  EXPECT_NEAR(b.front(), a.front(), 0.01 * a.front());
  // Updates smaller than a bf16 ulp would be lost without the fp32 master copy.
  EXPECT_LT(b.back(), 0.8 * b.front());
}

TEST(DecodeStepE2E, TheFixedStepReachesThePolicysEngineAndSamplesAsTheDynamicOne) {
  // models.policy.rollout.decode_step: fixed runs the policy's decode steps at bucket shapes (the
  // rollout/decode spans say which); the first GRPO iteration samples from the same weights with the
  // same draws, so its rewards are the dynamic run's (a near-tie aside, none in this run).
  const std::string dir = scratch_dir("decode-step");
  const auto [a, b] = rewards_without_and_with(
      dir, " --set stages.0.sft.steps=10 --set stages.1.grpo.iterations=2 --set stages.2.distill.steps=1", "fixed");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_NE(read_text(dir + "/fixed/trace/rank-00000.json").find("bucket_rows"), std::string::npos);
  EXPECT_EQ(read_text(dir + "/dynamic/trace/rank-00000.json").find("bucket_rows"), std::string::npos);
}

#ifdef HPCRL_TORCH_CUDA
TEST(DeviceE2E, CudaRunFollowsTheCpuRun) {
  const std::string dir = scratch_dir("cuda");
  Proc cpu = run_hpcrl("run " + kConfig + " --out " + dir + "/cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  Proc gpu = run_hpcrl("run " + kConfig + " --set run.device=cuda --out " + dir + "/gpu");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("cuda:0 float32"), std::string::npos) << "the role log line names the device";
  auto a = sft_losses(dir + "/cpu"), b = sft_losses(dir + "/gpu");
  ASSERT_EQ(a.size(), b.size());
  // Different kernels sum in different orders; fp32 training stays within 1e-3 for 10 steps.
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(b[i], a[i], 1e-3 * std::abs(a[i])) << "sft step " << i + 1;
  EXPECT_LT(b.back(), b.front());
  auto m = read_metrics(dir + "/gpu/metrics.jsonl");
  EXPECT_EQ(lines_with(m, "grpo", "reward/mean").size(), 3u);
  auto distill = lines_with(m, "distill", "loss");
  ASSERT_EQ(distill.size(), 20u);
  EXPECT_LT(distill.back()["loss"].get<double>(), distill.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir + "/gpu/checkpoints/02-distill/complete.json"));
}

TEST(DeviceE2E, CudaGrpoWithDecodeGraphsFollowsTheRunWithout) {
  // The policy's rollouts and evaluations decode through CUDA graphs (rollout.decode_step: graphs)
  // or dynamic steps; the draws are keyed the same, so the GRPO iterations see the same rewards
  // unless a near-tie in the sampled tokens parts the runs (then within 0.1 of each other).
  const std::string dir = scratch_dir("cuda-graphs");
  const auto [a, b] = rewards_without_and_with(
      dir, " --set run.device=cuda --set stages.0.sft.steps=10 --set stages.2.distill.steps=2", "graphs");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 0.1) << "iteration " << i + 1;
}

TEST(DeviceE2E, CudaBfloat16RunTrains) {
  const std::string dir = scratch_dir("cuda-bf16");
  Proc gpu = run_hpcrl("run " + kConfig + kSftOnly + " --set run.device=cuda --set run.dtype=bfloat16 --out " +
                       dir + "/run");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  auto b = sft_losses(dir + "/run");
  ASSERT_EQ(b.size(), 20u);
  EXPECT_LT(b.back(), 0.8 * b.front());
}
#else
TEST(DeviceE2E, CudaOnACpuBuildIsBadInputAndCreatesNothing) {
  const std::string out = scratch_dir("cuda-on-cpu") + "/run";
  Proc p = run_hpcrl("run " + kConfig + " --set run.device=cuda --out " + out);
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find("built against a CPU-only LibTorch"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("run.device: cpu"), std::string::npos) << p.output;
  EXPECT_FALSE(fs::exists(out)) << "no run directory for a run that cannot start";
}
#endif
