// The train/inference log-prob mismatch (algo/objectives/logprob_mismatch.h): zero when
// the engine's log-probs are the trainer's own, a hand-computed batch, only
// response tokens counted, and the every-N schedule of the extra forward.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "hpcrl/algo/objectives/logprob_mismatch.h"

namespace hpcrl::algo {
namespace {

// Two rows of 4 positions: row 0 has its response at columns 1-2 (column 0 a
// prompt token, column 3 padding), row 1 at columns 2-3.
at::Tensor response_mask() { return at::tensor({0.f, 1.f, 1.f, 0.f, 0.f, 0.f, 1.f, 1.f}).view({2, 4}); }

LogprobMismatch figures(const at::Tensor& trainer, const at::Tensor& engine, const at::Tensor& mask) {
  double abs_max = -1;
  const MismatchSums sums = mismatch_sums(trainer, engine, mask, abs_max);
  return reduce_mismatch(sums, abs_max, nullptr);
}

TEST(LogprobMismatch, IsExactlyZeroWhenTheEngineLogProbsAreTheTrainers) {
  const at::Tensor trainer = at::tensor({-5.f, -1.f, -2.f, -9.f, -3.f, -7.f, -0.5f, -1.5f}).view({2, 4});
  const LogprobMismatch m = figures(trainer, trainer.clone(), response_mask());
  EXPECT_EQ(m.abs_mean, 0.0);
  EXPECT_EQ(m.abs_max, 0.0);
  EXPECT_EQ(m.kl, 0.0);
  EXPECT_EQ(m.tokens, 4.0);
}

TEST(LogprobMismatch, HandComputedBatch) {
  const at::Tensor trainer = at::tensor({-5.f, -1.f, -2.f, -9.f, -3.f, -7.f, -0.5f, -1.5f}).view({2, 4});
  const at::Tensor engine = at::tensor({0.f, -1.5f, -2.f, 0.f, 0.f, 0.f, -0.25f, -1.5f}).view({2, 4});
  // r = train - engine on the 4 response tokens: 0.5, 0, -0.25, 0.
  // mean |r| = (0.5 + 0 + 0.25 + 0) / 4 = 0.1875; max |r| = 0.5.
  // k3 = exp(r) - 1 - r: exp(0.5) - 1.5 = 0.148721270700128, 0,
  //      exp(-0.25) - 0.75 = 0.028800783071405, 0;  mean = 0.177522053771533 / 4 = 0.044380513442883.
  const LogprobMismatch m = figures(trainer, engine, response_mask());
  EXPECT_DOUBLE_EQ(m.abs_mean, 0.1875);
  EXPECT_DOUBLE_EQ(m.abs_max, 0.5);
  EXPECT_NEAR(m.kl, 0.044380513442883, 1e-14);
  EXPECT_EQ(m.tokens, 4.0);
}

TEST(LogprobMismatch, PromptAndPaddingPositionsDoNotCount) {
  // The two batches differ only off the mask (prompt at column 0, padding at column 3 of row 0).
  const at::Tensor engine = at::tensor({0.f, -1.5f, -2.f, 0.f, 0.f, 0.f, -0.25f, -1.5f}).view({2, 4});
  at::Tensor trainer = at::tensor({-5.f, -1.f, -2.f, -9.f, -3.f, -7.f, -0.5f, -1.5f}).view({2, 4});
  at::Tensor other = trainer.clone();
  other[0][0] = -40.f;
  other[0][3] = 30.f;
  const LogprobMismatch a = figures(trainer, engine, response_mask());
  const LogprobMismatch b = figures(other, engine, response_mask());
  EXPECT_EQ(a.abs_mean, b.abs_mean);
  EXPECT_EQ(a.abs_max, b.abs_max);
  EXPECT_EQ(a.kl, b.kl);
}

TEST(LogprobMismatch, AnEmptyBatchReportsZero) {
  const at::Tensor none = at::zeros({0, 4});
  const LogprobMismatch m = figures(none, none, none);
  EXPECT_EQ(m.abs_mean, 0.0);
  EXPECT_EQ(m.abs_max, 0.0);
  EXPECT_EQ(m.kl, 0.0);
  EXPECT_EQ(m.tokens, 0.0);
}

TEST(LogprobMismatch, TheExtraForwardRunsEveryNthIterationFromTheFirst) {
  // every 10: iterations 0, 10, 20 (0 % 10 = 10 % 10 = 20 % 10 = 0), not 1, 9, 11.
  for (int64_t it : {0, 10, 20}) EXPECT_TRUE(mismatch_pass_due(it, 10)) << it;
  for (int64_t it : {1, 9, 11}) EXPECT_FALSE(mismatch_pass_due(it, 10)) << it;
  for (int64_t it : {0, 1, 2}) EXPECT_TRUE(mismatch_pass_due(it, 1)) << it;
  for (int64_t it : {0, 1, 10}) EXPECT_FALSE(mismatch_pass_due(it, 0)) << it;  // 0 = never
}

TEST(LogprobMismatch, MetricNames) {
  const auto metrics = mismatch_metrics({0.1875, 0.5, 0.0443, 4});
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics[0], std::make_pair(std::string("mismatch/logprob_abs_mean"), 0.1875));
  EXPECT_EQ(metrics[1], std::make_pair(std::string("mismatch/logprob_abs_max"), 0.5));
  EXPECT_EQ(metrics[2], std::make_pair(std::string("mismatch/kl"), 0.0443));
}

}  // namespace
}  // namespace hpcrl::algo
