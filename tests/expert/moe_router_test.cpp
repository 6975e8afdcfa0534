// Router and load-balancing loss against values computed by hand.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <vector>

#include "hpcrl/model/moe_router.h"

using hpcrl::model::load_balancing_loss;
using hpcrl::model::route_top_k;

namespace {

std::vector<double> softmax(const std::vector<double>& v) {
  double s = 0;
  for (double a : v) s += std::exp(a);
  std::vector<double> p;
  for (double a : v) p.push_back(std::exp(a) / s);
  return p;
}

at::Tensor from_rows(const std::vector<std::vector<double>>& rows) {
  std::vector<at::Tensor> t;
  for (const auto& r : rows) t.push_back(torch::tensor(r, at::kFloat));
  return at::stack(t);
}

at::Tensor logits_2x4() { return torch::tensor({{1.0, 3.0, 2.0, 0.0}, {0.0, 0.0, 1.0, 4.0}}); }

}  // namespace

TEST(MoeRouter, TopKPicksLargestProbabilitiesInOrder) {
  auto r = route_top_k(logits_2x4(), 2, /*normalize=*/false);
  ASSERT_EQ(r.experts.sizes(), (at::IntArrayRef{2, 2}));
  EXPECT_EQ(r.experts[0][0].item<int64_t>(), 1);
  EXPECT_EQ(r.experts[0][1].item<int64_t>(), 2);
  EXPECT_EQ(r.experts[1][0].item<int64_t>(), 3);
  EXPECT_EQ(r.experts[1][1].item<int64_t>(), 2);
  const auto p0 = softmax({1, 3, 2, 0});
  const auto p1 = softmax({0, 0, 1, 4});
  for (int e = 0; e < 4; ++e) {
    EXPECT_NEAR(r.probs[0][e].item<double>(), p0[e], 1e-6);
    EXPECT_NEAR(r.probs[1][e].item<double>(), p1[e], 1e-6);
  }
  // Unnormalised weights are the raw probabilities (qwen2_moe with norm_topk_prob=false).
  EXPECT_NEAR(r.weights[0][0].item<double>(), p0[1], 1e-6);
  EXPECT_NEAR(r.weights[0][1].item<double>(), p0[2], 1e-6);
  EXPECT_NEAR(r.weights[1][0].item<double>(), p1[3], 1e-6);
  EXPECT_NEAR(r.weights[1][1].item<double>(), p1[2], 1e-6);
}

TEST(MoeRouter, NormalisedWeightsAreRenormalisedTopKProbabilities) {
  auto r = route_top_k(logits_2x4(), 2, /*normalize=*/true);
  // e^3 / (e^3 + e^2) and e^2 / (e^3 + e^2): the softmax denominator cancels.
  EXPECT_NEAR(r.weights[0][0].item<double>(), std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(r.weights[0][1].item<double>(), std::exp(2.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(r.weights[1][0].item<double>(), std::exp(4.0) / (std::exp(4.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weights[1][1].item<double>(), std::exp(1.0) / (std::exp(4.0) + std::exp(1.0)), 1e-6);
  // k = 1 with normalisation: weight exactly 1.
  auto r1 = route_top_k(logits_2x4(), 1, true);
  EXPECT_DOUBLE_EQ(r1.weights[0][0].item<double>(), 1.0);
  EXPECT_EQ(r1.experts[1][0].item<int64_t>(), 3);
}

TEST(MoeRouter, SoftmaxRunsInFloat32ForHalfPrecisionLogits) {
  auto r = route_top_k(logits_2x4().to(at::kBFloat16), 2, true);
  EXPECT_EQ(r.probs.scalar_type(), at::kFloat);
  EXPECT_EQ(r.weights.scalar_type(), at::kFloat);
}

TEST(MoeRouter, RejectsKOutOfRange) {
  EXPECT_THROW(route_top_k(logits_2x4(), 5, true), std::exception);
  EXPECT_THROW(route_top_k(logits_2x4(), 0, true), std::exception);
}

TEST(MoeAuxLoss, MatchesHandComputation) {
  // Three tokens, four experts, k = 2.
  const std::vector<std::vector<double>> logits = {{1, 3, 2, 0}, {0, 0, 1, 4}, {2, -1, 0.5, 1}};
  auto r = route_top_k(from_rows(logits), 2, true);
  // Hand: top-2 of each row: {1,2}, {3,2}, {0,3}.
  const std::vector<std::vector<int>> chosen = {{1, 2}, {3, 2}, {0, 3}};
  for (int n = 0; n < 3; ++n)
    for (int j = 0; j < 2; ++j) ASSERT_EQ(r.experts[n][j].item<int64_t>(), chosen[n][j]);
  std::vector<double> f(4, 0.0), P(4, 0.0);
  for (int n = 0; n < 3; ++n) {
    const auto p = softmax(logits[n]);
    for (int e = 0; e < 4; ++e) P[e] += p[e] / 3.0;
    for (int e : chosen[n]) f[e] += 1.0 / 3.0;
  }
  double expected = 0;
  for (int e = 0; e < 4; ++e) expected += f[e] * P[e];
  expected *= 4.0;
  EXPECT_NEAR(load_balancing_loss(r, 4).item<double>(), expected, 1e-6);

  // Masking token 1 out equals the loss of tokens {0, 2} alone.
  auto r02 = route_top_k(from_rows({logits[0], logits[2]}), 2, true);
  const double without_1 = load_balancing_loss(r02, 4).item<double>();
  EXPECT_NEAR(load_balancing_loss(r, 4, torch::tensor({1, 0, 1})).item<double>(), without_1, 1e-6);
  EXPECT_NEAR(load_balancing_loss(r, 4, torch::tensor({true, false, true})).item<double>(), without_1, 1e-6);
}

TEST(MoeAuxLoss, UniformRoutingGivesK) {
  // Equal logits: P_e = 1/E for every e, and the f_e sum to k whichever experts win the tie.
  auto r = route_top_k(torch::zeros({6, 4}), 2, true);
  EXPECT_NEAR(load_balancing_loss(r, 4).item<double>(), 2.0, 1e-6);
}

TEST(MoeAuxLoss, GradientFlowsOnlyThroughProbabilities) {
  // d aux / d logits: f is constant, P_e = mean softmax; compare with autograd on
  // the explicit formula E · Σ_e f_e · mean_n softmax(l)_ne.
  at::Tensor l = torch::randn({5, 4}, torch::requires_grad());
  auto r = route_top_k(l, 2, true);
  load_balancing_loss(r, 4).backward();
  at::Tensor l2 = l.detach().clone().requires_grad_(true);
  at::Tensor f = at::one_hot(r.experts, 4).sum(1).to(at::kFloat).mean(0);
  (4.0 * (f * at::softmax(l2, 1).mean(0)).sum()).backward();
  EXPECT_TRUE(torch::allclose(l.grad(), l2.grad(), 1e-6, 1e-7));
  EXPECT_GT(l.grad().abs().max().item<double>(), 0.0);
}

TEST(MoeAuxLoss, NoTokensGivesZero) {
  auto r = route_top_k(torch::zeros({0, 4}), 2, true);
  EXPECT_EQ(load_balancing_loss(r, 4).item<double>(), 0.0);
}
