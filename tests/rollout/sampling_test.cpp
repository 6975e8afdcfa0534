// Token sampling on a hand-made logit vector: temperature 0 is argmax, top-k
// and top-p restrict the support to exactly the tokens they should keep and
// the kept tokens are drawn with their renormalised probabilities (4000 draws
// from a fixed seed, each frequency within 4.5 standard deviations), and a
// (seed, prompt, sample) triple always gives the same draws.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <vector>

#include "hpcrl/rollout/sampling.h"

namespace {

using namespace hpcrl;

// Probabilities 0.405, 0.245, 0.149, 0.090, 0.055, 0.033, 0.020, 0.003 (sorted, distinct).
at::Tensor logits() { return at::tensor({2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f}); }

std::vector<int64_t> counts(double temperature, int64_t top_k, double top_p, int draws = 4000, uint64_t seed = 1) {
  at::Generator gen = rollout::sample_generator(seed, 0, 0);
  std::vector<int64_t> c(8, 0);
  for (int i = 0; i < draws; ++i) ++c[rollout::sample_token(logits(), temperature, top_k, top_p, gen)];
  return c;
}

// Draw frequencies match `probs` (zero entries never drawn).
void expect_distribution(const std::vector<int64_t>& c, const at::Tensor& probs, int draws = 4000) {
  for (int64_t i = 0; i < 8; ++i) {
    const double p = probs[i].item<double>();
    if (p == 0) {
      EXPECT_EQ(c[i], 0) << "token " << i << " is outside the support";
      continue;
    }
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(double(c[i]), draws * p, 4.5 * sd + 1) << "token " << i;
  }
}

TEST(Sampling, TemperatureZeroIsArgmax) {
  at::Generator gen = rollout::sample_generator(3, 1, 2);
  at::Tensor l = at::tensor({0.1f, 0.7f, 3.0f, -1.0f, 2.999f});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(rollout::sample_token(l, 0.0, 0, 1.0, gen), 2);
  // Filters do not matter for greedy.
  EXPECT_EQ(rollout::sample_token(l, 0.0, 1, 0.1, gen), 2);
}

TEST(Sampling, TemperatureScalesTheDistribution) {
  expect_distribution(counts(1.0, 0, 1.0), logits().softmax(0));
  expect_distribution(counts(0.5, 0, 1.0), (logits() / 0.5).softmax(0));
  expect_distribution(counts(2.0, 0, 1.0), (logits() / 2.0).softmax(0));
}

TEST(Sampling, TopKKeepsExactlyTheKMostLikelyTokens) {
  auto c = counts(1.0, 3, 1.0);
  at::Tensor p = at::zeros({8});
  p.narrow(0, 0, 3).copy_(logits().narrow(0, 0, 3).softmax(0));
  expect_distribution(c, p);
  for (int64_t i = 0; i < 3; ++i) EXPECT_GT(c[i], 0);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // Cumulative mass: 0.405, 0.650, 0.799, ... so top_p = 0.7 keeps tokens 0..2.
  at::Tensor full = logits().softmax(0);
  ASSERT_LT(full.narrow(0, 0, 2).sum().item<double>(), 0.7);
  ASSERT_GE(full.narrow(0, 0, 3).sum().item<double>(), 0.7);
  auto c = counts(1.0, 0, 0.7);
  at::Tensor p = at::zeros({8});
  p.narrow(0, 0, 3).copy_(full.narrow(0, 0, 3) / full.narrow(0, 0, 3).sum());
  expect_distribution(c, p);
  // A top_p below the largest probability keeps only the top token.
  auto one = counts(1.0, 0, 0.2, 200);
  EXPECT_EQ(one[0], 200);
}

TEST(Sampling, TopPAppliesToTheTopKRenormalisedDistribution) {
  // Top 4 renormalised: 0.455, 0.276, 0.167, 0.101 (cumulative 0.455, 0.731, ...):
  // top_p = 0.7 then keeps tokens 0 and 1 — where top_p alone keeps 0..2.
  auto c = counts(1.0, 4, 0.7);
  at::Tensor p = at::zeros({8});
  p.narrow(0, 0, 2).copy_(logits().narrow(0, 0, 2).softmax(0));
  expect_distribution(c, p);
}

TEST(Sampling, SeedsAreReproducibleAndIndependentPerSample) {
  auto draws = [](uint64_t seed, int64_t prompt, int64_t sample) {
    at::Generator gen = rollout::sample_generator(seed, prompt, sample);
    std::vector<int64_t> v;
    for (int i = 0; i < 64; ++i) v.push_back(rollout::sample_token(logits(), 1.0, 0, 1.0, gen));
    return v;
  };
  EXPECT_EQ(draws(7, 3, 1), draws(7, 3, 1));
  EXPECT_NE(draws(7, 3, 1), draws(8, 3, 1));
  EXPECT_NE(draws(7, 3, 1), draws(7, 4, 1));
  EXPECT_NE(draws(7, 3, 1), draws(7, 3, 2));
  // (prompt, sample) and (sample, prompt) are different streams.
  EXPECT_NE(draws(7, 1, 2), draws(7, 2, 1));
}

}  // namespace
