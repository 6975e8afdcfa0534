// End to end: how rows become micro-batches changes the cost, never the
// training. SFT, GRPO, PPO (policy and critic) and distillation (teacher and
// student) with `packing: true` (several sequences per row, no padding) and
// with a token budget per micro-batch (`micro_batch_tokens`) follow the
// padded run (SFT also pipelined, pp=2); GRPO with sp=2 and packing follows sp=1, also for
// the per-sequence loss aggregation whose row means span both sp ranks.
#include <gtest/gtest.h>


#include "run_util.h"

using namespace hpcrl::test;

namespace {

const std::string kSft = "tests/e2e/data/tiny.yaml --set 'stages=[{sft: {model: policy, data: arith, steps: 10, "
                         "batch: 16, lr: 3.0e-3, micro_batch: 8}}]' --set run.eval_before_train=false";

const std::string kGrpo = "tests/e2e/data/grpo_judge.yaml";

void expect_same_grpo(const std::string& a_dir, const std::string& b_dir) {
  auto a = lines_with(read_metrics(a_dir + "/metrics.jsonl"), "grpo", "reward/mean");
  auto b = lines_with(read_metrics(b_dir + "/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_GT(a[0]["grad_norm"].get<double>(), 0.0);
  EXPECT_GT(a[1]["kl"].get<double>(), 0.0);
  expect_same_rollouts(a, b, {{"loss", 1e-4}, {"kl", 1e-4}, {"entropy", 1e-4}, {"clip_frac", 1e-4}, {"grad_norm", 1e-4}});
}

}  // namespace

TEST(PackingE2E, SftPackedAndTokenBudgetedFollowPadded) {
  const std::string dir = scratch_dir("packing-sft");
  Proc padded = run_hpcrl("run " + kSft + " --out " + dir + "/padded");
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  Proc packed = run_hpcrl("run " + kSft + " --set stages[0].sft.packing=true --out " + dir + "/packed");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  // ~60 tokens per micro-batch: many more, smaller micro-batches than micro_batch: 8.
  Proc budget = run_hpcrl("run " + kSft + " --set stages[0].sft.packing=true --set stages[0].sft.micro_batch_tokens=60"
                          " --out " + dir + "/budget");
  ASSERT_EQ(budget.exit_code, 0) << budget.output;
  auto a = lines_with(read_metrics(dir + "/padded/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(a.size(), 10u);
  EXPECT_LT(a.back()["loss"].get<double>(), 0.8 * a.front()["loss"].get<double>());  // it trains
  for (const char* run : {"/packed", "/budget"}) {
    SCOPED_TRACE(run);
    auto b = lines_with(read_metrics(dir + run + "/metrics.jsonl"), "sft", "loss");
    expect_close_curves(a, b, "loss", 1e-4);
    expect_close_curves(a, b, "grad_norm", 1e-4);
  }
}

TEST(PackingE2E, GrpoPackedFollowsPadded) {
  const std::string dir = scratch_dir("packing-grpo");
  Proc padded = run_hpcrl("run " + kGrpo + " --out " + dir + "/padded");
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  Proc packed = run_hpcrl("run " + kGrpo + " --set stages[0].grpo.packing=true --set stages[0].grpo.micro_batch_tokens=300"
                          " --out " + dir + "/packed");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  expect_same_grpo(dir + "/padded", dir + "/packed");
}

TEST(PackingE2E, GrpoSp2PackedFollowsSp1ForPerSequenceLossMeans) {
  const std::string dir = scratch_dir("packing-grpo-sp");
  const std::string yaml = kGrpo + " --set stages[0].grpo.loss_agg=seq_mean_token_mean";
  Proc one = run_hpcrl("run " + yaml + " --out " + dir + "/sp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + yaml + " --set models.policy.parallel.sp=2 --set models.reference.parallel.sp=2"
                       " --set stages[0].grpo.packing=true --out " + dir + "/sp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_same_grpo(dir + "/sp1", dir + "/sp2");
}

TEST(PackingE2E, PpoCriticPackedFollowsPadded) {
  const std::string dir = scratch_dir("packing-ppo");
  const std::string yaml = "tests/e2e/data/ppo_judge.yaml";
  Proc padded = run_hpcrl("run " + yaml + " --out " + dir + "/padded");
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  Proc packed = run_hpcrl("run " + yaml + " --set stages[0].ppo.packing=true --set stages[0].ppo.micro_batch_tokens=90"
                          " --out " + dir + "/packed");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  auto a = lines_with(read_metrics(dir + "/padded/metrics.jsonl"), "ppo", "critic/loss");
  auto b = lines_with(read_metrics(dir + "/packed/metrics.jsonl"), "ppo", "critic/loss");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0]["critic/values_mean"], a[1]["critic/values_mean"]);  // the critic was trained
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(a[i]["reward/mean"], b[i]["reward/mean"]) << "iteration " << i + 1;
  for (const char* key : {"loss", "kl", "grad_norm", "critic/loss", "critic/values_mean", "critic/clip_frac"})
    expect_close_curves(a, b, key, 1e-4);
}

TEST(PackingE2E, DistillPackedFollowsPadded) {
  const std::string distill = "tests/e2e/data/tiny.yaml --set 'stages=[{distill: {teacher: policy, student: student, "
                              "data: arith, steps: 6, batch: 16, lr: 3.0e-3, top_k: 16, micro_batch: 8}}]' "
                              "--set run.eval_before_train=false";
  const std::string dir = scratch_dir("packing-distill");
  Proc padded = run_hpcrl("run " + distill + " --out " + dir + "/padded");
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  Proc packed = run_hpcrl("run " + distill + " --set stages[0].distill.packing=true"
                          " --set stages[0].distill.micro_batch_tokens=100 --out " + dir + "/packed");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  auto a = lines_with(read_metrics(dir + "/padded/metrics.jsonl"), "distill", "loss");
  auto b = lines_with(read_metrics(dir + "/packed/metrics.jsonl"), "distill", "loss");
  ASSERT_EQ(a.size(), 6u);
  EXPECT_LT(a.back()["loss"].get<double>(), a.front()["loss"].get<double>());  // the student moves toward the teacher
  expect_close_curves(a, b, "loss", 1e-4);
  expect_close_curves(a, b, "grad_norm", 1e-4);
}

TEST(PackingE2E, SftPp2PackedFollowsPadded) {
  // Packed micro-batches carry their positions and segments through the pipeline's stages.
  const std::string dir = scratch_dir("packing-sft-pp");
  Proc padded = run_hpcrl("run " + kSft + " --out " + dir + "/padded");
  ASSERT_EQ(padded.exit_code, 0) << padded.output;
  Proc pp = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --set stages[0].sft.packing=true"
                      " --set stages[0].sft.micro_batch_tokens=120 --out " + dir + "/pp2", 2);
  ASSERT_EQ(pp.exit_code, 0) << pp.output;
  auto a = lines_with(read_metrics(dir + "/padded/metrics.jsonl"), "sft", "loss");
  auto b = lines_with(read_metrics(dir + "/pp2/metrics.jsonl"), "sft", "loss");
  expect_close_curves(a, b, "loss", 1e-4);
  expect_close_curves(a, b, "grad_norm", 1e-4);
}
