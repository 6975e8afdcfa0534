// RL losses and advantages against values worked out by hand (comments show the arithmetic).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/util/error.h"

using namespace hpcrl::algo;

namespace {
void expect_near(const at::Tensor& t, std::vector<float> want, double tol = 1e-5) {
  auto flat = t.reshape({-1}).to(at::kFloat).contiguous();
  ASSERT_EQ(flat.numel(), (int64_t)want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(flat[i].item<float>(), want[i], tol) << "index " << i;
}
}  // namespace

TEST(GroupAdvantages, StdNormalisedAndDrGrpo) {
  at::Tensor s = torch::tensor({1.f, 0.f, 0.f, 1.f, 1.f, 1.f, 1.f, 1.f});
  // group 1: mean .5, unbiased std sqrt(4·.25/3) = .57735 → ±.866025; group 2: identical → 0.
  expect_near(group_advantages(s, 4, true), {.866025f, -.866025f, -.866025f, .866025f, 0, 0, 0, 0}, 1e-4);
  expect_near(group_advantages(s, 4, false), {.5f, -.5f, -.5f, .5f, 0, 0, 0, 0});
}

TEST(LossAgg, ThreeModes) {
  at::Tensor v = torch::tensor({{1.f, 2.f, 3.f}, {4.f, 0.f, 0.f}});
  at::Tensor m = torch::tensor({{1.f, 1.f, 1.f}, {1.f, 0.f, 0.f}});
  EXPECT_NEAR(aggregate(v, m, LossAgg::token_mean).item<float>(), 2.5f, 1e-6);         // 10 / 4
  EXPECT_NEAR(aggregate(v, m, LossAgg::seq_mean_token_sum).item<float>(), 5.0f, 1e-6);   // (6 + 4) / 2
  EXPECT_NEAR(aggregate(v, m, LossAgg::seq_mean_token_mean).item<float>(), 3.0f, 1e-6);  // (2 + 4) / 2
}

TEST(PolicyLoss, AsymmetricClipBothSides) {
  // ratios 1.5, 0.5, 1.0, 0.5 with advantages +1, +1, -1, -1; clip [0.2, 0.28].
  at::Tensor old = torch::zeros({1, 4});
  at::Tensor logp = torch::log(torch::tensor({{1.5f, 0.5f, 1.0f, 0.5f}})).requires_grad_(true);
  PolicyLossInputs in{logp, old, torch::tensor({{1.f, 1.f, -1.f, -1.f}}), torch::ones({1, 4}), {}, {}};
  PolicyLossConfig cfg;
  cfg.clip_low = 0.2;
  cfg.clip_high = 0.28;
  auto out = policy_loss(in, cfg);
  // token 1: max(-1.5, -1.28) = -1.28 (clipped high); token 2: max(-0.5, -0.8) = -0.5;
  // token 3: max(1, 1) = 1; token 4: max(0.5, 0.8) = 0.8 (clipped low). mean = 0.02/4.
  EXPECT_NEAR(out.loss.item<float>(), (-1.28f - 0.5f + 1.0f + 0.8f) / 4, 1e-6);
  EXPECT_NEAR(out.clip_frac, 0.5, 1e-9);
  out.loss.backward();
  // Clipped tokens carry no gradient; unclipped: d(-A·r)/dlogp = -A·r / 4.
  expect_near(logp.grad(), {0.f, -0.5f / 4, 1.0f / 4, 0.f});
}

TEST(PolicyLoss, MaskedTokensDoNotCount) {
  at::Tensor logp = torch::log(torch::tensor({{1.5f, 3.0f}}));
  PolicyLossInputs in{logp, torch::zeros({1, 2}), torch::ones({1, 2}), torch::tensor({{1.f, 0.f}}), {}, {}};
  PolicyLossConfig cfg;
  EXPECT_NEAR(policy_loss(in, cfg).loss.item<float>(), -1.2f, 1e-6);
}

TEST(ImportanceWeights, TruncatedAtTheCap) {
  // π_old/π_behaviour = exp(old - behaviour): 0.5/0.25 = 2, 0.3/0.6 = 0.5, 0.9/0.1 = 9 → capped at C = 3.
  at::Tensor old = torch::log(torch::tensor({{0.5f, 0.3f, 0.9f}}));
  at::Tensor behaviour = torch::log(torch::tensor({{0.25f, 0.6f, 0.1f}}));
  expect_near(importance_weights(old, behaviour, 3.0), {2.f, 0.5f, 3.f});
  expect_near(importance_weights(old, behaviour, 0.0), {2.f, 0.5f, 9.f});  // cap 0: untruncated
}

TEST(PolicyLoss, DecoupledObjectiveWeightsTheSurrogateByTheTruncatedBehaviourRatio) {
  // r = π/π_old = 1.1 (inside clip 0.2) on both tokens, A = +1; w = min(π_old/π_beh, 2): 0.5/0.4 = 1.25
  // and 0.5/0.1 = 5 → 2. pg = -A·r·w: -1.375 and -2.2; token mean = -1.7875.
  at::Tensor old = torch::log(torch::tensor({{0.5f, 0.5f}}));
  at::Tensor logp = (old + std::log(1.1f)).requires_grad_(true);
  PolicyLossInputs in{logp, old, torch::ones({1, 2}), torch::ones({1, 2}), {}, {}};
  in.behaviour_logp = torch::log(torch::tensor({{0.4f, 0.1f}}));
  PolicyLossConfig cfg;
  cfg.tis_cap = 2.0;
  auto out = policy_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<float>(), (-1.1f * 1.25f - 1.1f * 2.f) / 2, 1e-5);
  out.loss.backward();
  // d(-A·r·w)/dlogp = -r·w / 2 (w carries no gradient): -0.6875, -1.1.
  expect_near(logp.grad(), {-1.1f * 1.25f / 2, -1.1f * 2.f / 2});
}

TEST(KlEstimators, K1K2K3) {
  at::Tensor logp = torch::zeros({1});
  at::Tensor ref = torch::full({1}, std::log(0.5f));
  const float d = std::log(2.0f);
  EXPECT_NEAR(kl_estimate(logp, ref, KlEstimator::k1).item<float>(), d, 1e-6);
  EXPECT_NEAR(kl_estimate(logp, ref, KlEstimator::k2).item<float>(), 0.5f * d * d, 1e-6);
  EXPECT_NEAR(kl_estimate(logp, ref, KlEstimator::k3).item<float>(), 0.5f + d - 1.0f, 1e-6);  // e^-d + d - 1
}

TEST(PolicyLoss, KlTermAndEntropyBonus) {
  at::Tensor logp = torch::zeros({1, 2});
  PolicyLossInputs in{logp, torch::zeros({1, 2}), torch::zeros({1, 2}), torch::ones({1, 2}),
                      torch::full({1, 2}, std::log(0.5f)), torch::full({1, 2}, 2.0f)};
  PolicyLossConfig cfg;
  cfg.kl_coef = 0.1;
  cfg.kl_estimator = KlEstimator::k1;
  cfg.entropy_coef = 0.01;
  auto out = policy_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<float>(), 0.1f * std::log(2.0f) - 0.01f * 2.0f, 1e-6);
  EXPECT_NEAR(out.kl, std::log(2.0), 1e-6);
  EXPECT_NEAR(out.entropy, 2.0, 1e-6);
}

TEST(Gae, HandWorkedRecursion) {
  // γ=1, λ=.5: δ2 = 1 - .7 = .3; δ1 = .7 - .6 = .1 → A1 = .1 + .5·.3 = .25; A0 = .1 + .5·.25 = .225.
  auto r = gae(torch::tensor({{0.f, 0.f, 1.f}}), torch::tensor({{.5f, .6f, .7f}}), torch::ones({1, 3}), 1.0, 0.5,
               /*whiten=*/false);
  expect_near(r.advantages, {.225f, .25f, .3f});
  expect_near(r.returns, {.725f, .85f, 1.0f});
}

TEST(Gae, PaddingResetsRecursion) {
  // Last token padded: its value (.9) must not leak. δ1 = 1 - .6 = .4; A0 = .1 + .5·.4 = .3.
  auto r = gae(torch::tensor({{0.f, 1.f, 0.f}}), torch::tensor({{.5f, .6f, .9f}}), torch::tensor({{1.f, 1.f, 0.f}}),
               1.0, 0.5, false);
  expect_near(r.advantages, {.3f, .4f, 0.f});
}

TEST(Gae, WhitenedHasZeroMeanUnitVariance) {
  auto r = gae(torch::tensor({{0.f, 0.f, 1.f}, {1.f, 0.f, 0.f}}), torch::zeros({2, 3}), torch::ones({2, 3}), 0.9, 0.95,
               true);
  EXPECT_NEAR(r.advantages.mean().item<float>(), 0.f, 1e-5);
  EXPECT_NEAR(r.advantages.pow(2).mean().item<float>(), 1.f, 1e-4);
}

TEST(KlShapedRewards, ScoreOnLastTokenKlEverywhere) {
  auto r = kl_shaped_rewards(torch::tensor({2.f}), torch::tensor({{.1f, .2f, .3f}}), torch::tensor({{1.f, 1.f, 0.f}}),
                             0.5);
  expect_near(r, {-.05f, 1.9f, 0.f});
}

TEST(ValueLoss, ClippedBranchWins) {
  // v=1, v_old=.5, R=2, clip .2: clipped v = .7; max((1-2)², (.7-2)²) = 1.69; ½ → .845.
  auto [loss, frac] = value_loss(torch::tensor({{1.f}}), torch::tensor({{.5f}}), torch::tensor({{2.f}}),
                                 torch::ones({1, 1}), 0.2);
  EXPECT_NEAR(loss.item<float>(), 0.845f, 1e-6);
  EXPECT_NEAR(frac, 1.0, 1e-9);
}
