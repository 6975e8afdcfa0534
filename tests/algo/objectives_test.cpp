// The critic-free estimators (RLOO, REINFORCE++ and its baseline variant, the
// std_norm choices) and the surrogates beside PPO's clip (GSPO, GSPO-token,
// CISPO) against values worked out by hand; comments show the arithmetic.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/objectives/critic_free_advantages.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/objectives/sequence_ratio.h"

using namespace hpcrl::algo;
using hpcrl::config::AdvantageEstimator;
using hpcrl::config::StdNorm;

namespace {
void expect_near(const at::Tensor& t, std::vector<float> want, double tol = 1e-5) {
  auto flat = t.reshape({-1}).to(at::kFloat).contiguous();
  ASSERT_EQ(flat.numel(), (int64_t)want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(flat[i].item<float>(), want[i], tol) << "index " << i;
}

// Three samples of one group with 2, 1 and 3 response tokens.
Experience three_samples(std::vector<float> scores) {
  Experience exp;
  exp.batch.loss_mask = torch::tensor({{1.f, 1.f, 0.f}, {1.f, 0.f, 0.f}, {1.f, 1.f, 1.f}});
  exp.scores = torch::tensor(scores);
  exp.old_logp = torch::zeros({3, 3});
  return exp;
}

hpcrl::config::GrpoStage stage(AdvantageEstimator est, StdNorm norm) {
  hpcrl::config::GrpoStage s;
  s.group = 3;
  s.advantage = est;
  s.std_norm = norm;
  return s;
}
}  // namespace

TEST(Rloo, LeaveOneOutBaseline) {
  // r = (1, 0, 0): baselines (0+0)/2 = 0, (1+0)/2 = .5, (1+0)/2 = .5 → 1, -.5, -.5.
  expect_near(rloo_advantages(torch::tensor({1.f, 0.f, 0.f}), 3), {1.f, -.5f, -.5f});
  // = G/(G-1)·(r - mean): 3/2·(2/3) = 1, 3/2·(-1/3) = -.5.
}

TEST(Rloo, ThroughTheStageDefaultsToNoStdDivision) {
  Experience exp = three_samples({1.f, 0.f, 0.f});
  critic_free_advantages(stage(AdvantageEstimator::rloo, StdNorm::none), KlEstimator::k3, Role{}, exp);
  // each row's advantage on its response tokens, 0 elsewhere
  expect_near(exp.advantages, {1.f, 1.f, 0.f, -.5f, 0.f, 0.f, -.5f, -.5f, -.5f});
}

TEST(GroupStd, UnbiasedPerGroup) {
  // (1, 0, 0): mean 1/3, Σ(r-mean)² = 4/9 + 1/9 + 1/9 = 2/3, /(3-1) = 1/3 → std .57735.
  expect_near(group_std(torch::tensor({1.f, 0.f, 0.f}), 3), {.57735f, .57735f, .57735f});
}

TEST(StdNorm, BatchDividesByTheStdOfAllRewards) {
  // Two groups of 3: (2, 0, 1) and (1, 1, 1). Centred on group means 1 and 1: (1, -1, 0, 0, 0, 0).
  // Batch: mean 1, Σ(r-1)² = 1 + 1 = 2, unbiased /5 → std .632456 → (1.58114, -1.58114, 0, 0, 0, 0).
  Experience exp;
  exp.batch.loss_mask = torch::ones({6, 1});
  exp.scores = torch::tensor({2.f, 0.f, 1.f, 1.f, 1.f, 1.f});
  exp.old_logp = torch::zeros({6, 1});
  critic_free_advantages(stage(AdvantageEstimator::grpo, StdNorm::batch), KlEstimator::k3, Role{}, exp);
  expect_near(exp.advantages, {1.58114f, -1.58114f, 0.f, 0.f, 0.f, 0.f});
}

TEST(KlShapedRewards, ScoreLandsOnTheLastResponseTokenAfterThePrompt) {
  // Response tokens at positions 1 and 2 (a prompt before them): score 2 at position 2,
  // -0.5·kl at 1 and 2: (0, -.1, -.15 + 2, 0).
  auto r = kl_shaped_rewards(torch::tensor({2.f}), torch::tensor({{.1f, .2f, .3f, .4f}}),
                             torch::tensor({{0.f, 1.f, 1.f, 0.f}}), 0.5);
  expect_near(r, {0.f, -.1f, 1.85f, 0.f});
}

TEST(KlShapedRewards, LastResponsePosition) {
  expect_near(last_response_position(torch::tensor({{0.f, 1.f, 1.f, 0.f}, {1.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}})),
              {2.f, 0.f, 0.f});
}

TEST(ReinforcePp, ReturnsSumTheRewardsToTheEnd) {
  // (0, -.1, 1.85, 0) masked (0, 1, 1, 0): G_1 = -.1 + 1.85 = 1.75, G_2 = 1.85.
  expect_near(reverse_cumsum_returns(torch::tensor({{0.f, -.1f, 1.85f, 0.f}}), torch::tensor({{0.f, 1.f, 1.f, 0.f}})),
              {0.f, 1.75f, 1.85f, 0.f});
}

TEST(ReinforcePp, WhitenedOverTheBatchTokens) {
  // Scores (1, 0, 0), no KL: returns are the score on every response token:
  // tokens (1, 1 | 0 | 0, 0, 0) → mean 2/6 = 1/3, population var = 2/6 - 1/9 = 2/9 → std .471405;
  // whitened: (1 - 1/3)/.471405 = 1.41421, (0 - 1/3)/.471405 = -.707107.
  Experience exp = three_samples({1.f, 0.f, 0.f});
  critic_free_advantages(stage(AdvantageEstimator::reinforce_pp, StdNorm::batch), KlEstimator::k3, Role{}, exp);
  expect_near(exp.advantages, {1.41421f, 1.41421f, 0.f, -.707107f, 0.f, 0.f, -.707107f, -.707107f, -.707107f}, 1e-4);
}

TEST(ReinforcePp, BaselineSubtractsTheGroupMeanFirst) {
  // Scores (2, 1, 0): group mean 1 → (1, 0, -1); unwhitened (std_norm: none) the returns are those
  // on each response token.
  Experience exp = three_samples({2.f, 1.f, 0.f});
  critic_free_advantages(stage(AdvantageEstimator::reinforce_pp_baseline, StdNorm::none), KlEstimator::k3, Role{}, exp);
  expect_near(exp.advantages, {1.f, 1.f, 0.f, 0.f, 0.f, 0.f, -1.f, -1.f, -1.f});
}

TEST(ReinforcePp, KlInTheRewardShapesEveryToken) {
  // One sample, 2 response tokens, score 1, k1 KL = logp - ref = (.2, .4), coef .5:
  // rewards (-.1, 1 - .2) → returns (.7, .8) (std_norm: none).
  Experience exp;
  exp.batch.loss_mask = torch::tensor({{1.f, 1.f}});
  exp.scores = torch::tensor({1.f});
  exp.old_logp = torch::tensor({{.2f, .4f}});
  exp.ref_logp = torch::zeros({1, 2});
  hpcrl::config::GrpoStage s = stage(AdvantageEstimator::reinforce_pp, StdNorm::none);
  s.group = 1;
  s.kl.coef = 0.5;
  s.kl.in_reward = true;
  critic_free_advantages(s, KlEstimator::k1, Role{}, exp);
  expect_near(exp.advantages, {.7f, .8f});
}

TEST(Moments, MeanAndBothVariances) {
  const Moments m = moments_of(torch::tensor({1.f, 2.f, 3.f, 9.f}), torch::tensor({1.f, 1.f, 1.f, 0.f}));
  EXPECT_DOUBLE_EQ(m.n, 3);
  EXPECT_DOUBLE_EQ(m.mean(), 2);               // 6 / 3
  EXPECT_NEAR(m.variance(true), 1.0, 1e-12);   // (1 + 0 + 1) / 2
  EXPECT_NEAR(m.variance(false), 2.0 / 3, 1e-12);
}

TEST(SequenceRatio, MeanLogRatioPerSequenceAcrossPackedRows) {
  // One packed row holding sequence 0 (tokens 0-1) and sequence 1 (token 2), a padding token, then a
  // second row with sequence 1's other token. log-ratios .1, .3 | .2, pad, | .4:
  // sequence 0: (.1 + .3)/2 = .2; sequence 1: (.2 + .4)/2 = .3.
  auto lr = torch::tensor({{.1f, .3f, .2f, 5.f}, {.4f, 0.f, 0.f, 0.f}});
  auto mask = torch::tensor({{1.f, 1.f, 1.f, 0.f}, {1.f, 0.f, 0.f, 0.f}});
  auto rows = torch::tensor({{0, 0, 1, 0}, {1, 0, 0, 0}}, torch::kLong);
  expect_near(sequence_log_ratio(lr, mask, rows, torch::tensor({2.f, 2.f}), nullptr),
              {.2f, .2f, .3f, 0.f, .3f, 0.f, 0.f, 0.f});
}

namespace {
PolicyLossInputs gspo_inputs(const at::Tensor& logp, const at::Tensor& adv, const at::Tensor& mask) {
  PolicyLossInputs in{logp, torch::zeros_like(logp), adv, mask, {}, {}};
  in.seq_log_ratio = sequence_log_ratio(logp - in.old_logp, mask, torch::zeros_like(mask).to(torch::kLong),
                                        mask.sum(1), nullptr);
  return in;
}
}  // namespace

TEST(Gspo, SequenceRatioIsTheGeometricMeanOfTokenRatios) {
  // Token ratios 1.2, 1.0, 0.9: s = (1.2·1.0·0.9)^(1/3) = 1.08^(1/3) = 1.025986; A = +1, clip .2 (unclipped):
  // every token's value -A·s; seq_mean_token_mean → loss -1.025986.
  at::Tensor logp = torch::log(torch::tensor({{1.2f, 1.0f, 0.9f}})).requires_grad_(true);
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::gspo;
  cfg.agg = LossAgg::seq_mean_token_mean;
  auto out = policy_loss(gspo_inputs(logp, torch::ones({1, 3}), torch::ones({1, 3})), cfg);
  EXPECT_NEAR(out.loss.item<float>(), -1.025986f, 1e-5);
  EXPECT_NEAR(out.ratio_mean, 1.025986, 1e-5);
  out.loss.backward();
  // d(-A·s)/dlogp_t = -A·s/|y| = -1.025986/3 = -.341995 on every token.
  expect_near(logp.grad(), {-.341995f, -.341995f, -.341995f});
}

TEST(Gspo, GradientEqualsTheSequenceLevelObjective) {
  // The same gradient computed directly from GSPO's sequence-level form
  // -A·exp(mean(logp - old)) for two sequences of different lengths, token_mean aggregation
  // (4 tokens: seq 0 has 3, seq 1 has 1), A = (+1, -2).
  at::Tensor base = torch::log(torch::tensor({{1.1f, 0.95f, 1.05f}, {1.02f, 1.f, 1.f}}));
  at::Tensor mask = torch::tensor({{1.f, 1.f, 1.f}, {1.f, 0.f, 0.f}});
  at::Tensor adv = torch::tensor({{1.f, 1.f, 1.f}, {-2.f, -2.f, -2.f}}) * mask;
  at::Tensor logp = base.clone().requires_grad_(true);
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::gspo;
  cfg.agg = LossAgg::token_mean;
  PolicyLossInputs in{logp, torch::zeros_like(logp), adv, mask, {}, {}};
  in.seq_log_ratio = sequence_log_ratio(logp, mask, torch::tensor({{0, 0, 0}, {1, 1, 1}}, torch::kLong), mask.sum(1), nullptr);
  policy_loss(in, cfg).loss.backward();

  at::Tensor direct = base.clone().requires_grad_(true);
  at::Tensor s = torch::exp((direct * mask).sum(1) / mask.sum(1));          // [2]
  at::Tensor a = torch::tensor({1.f, -2.f});
  // token_mean weighs a sequence by its token count: (3·(-A0·s0) + 1·(-A1·s1)) / 4 (unclipped: |s - 1| < .2).
  ((-a * s) * mask.sum(1)).sum().div(4).backward();
  EXPECT_TRUE(torch::allclose(logp.grad(), direct.grad(), 1e-6, 1e-7)) << logp.grad() << direct.grad();
}

TEST(Gspo, AClippedSequenceLosesTheGradientOfAllItsTokens) {
  // Token ratios 1.5 and 0.8: s = sqrt(1.2) = 1.095445 > 1 + 4e-4 with A = +1 → clipped at the
  // sequence level, no gradient on either token (PPO's clip would still move the 0.8 token).
  at::Tensor logp = torch::log(torch::tensor({{1.5f, 0.8f}})).requires_grad_(true);
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::gspo;
  cfg.clip_low = 3e-4;
  cfg.clip_high = 4e-4;
  cfg.agg = LossAgg::seq_mean_token_mean;
  auto out = policy_loss(gspo_inputs(logp, torch::ones({1, 2}), torch::ones({1, 2})), cfg);
  EXPECT_NEAR(out.loss.item<float>(), -1.0004f, 1e-6);  // -A·(1 + ε_high)
  EXPECT_NEAR(out.clip_frac, 1.0, 1e-9);
  out.loss.backward();
  expect_near(logp.grad(), {0.f, 0.f});
}

TEST(GspoToken, TokenAdvantagesWeighTheSequenceRatio) {
  // Ratios 1.1, 1/1.1: s = 1; A per token (+1, -1); each token's gradient -A_t·s/2 (seq mean of 2):
  // (-.5, +.5), and the value (-1 + 1)/2 = 0.
  at::Tensor logp = torch::log(torch::tensor({{1.1f, 1.f / 1.1f}})).requires_grad_(true);
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::gspo_token;
  cfg.agg = LossAgg::seq_mean_token_mean;
  auto out = policy_loss(gspo_inputs(logp, torch::tensor({{1.f, -1.f}}), torch::ones({1, 2})), cfg);
  EXPECT_NEAR(out.loss.item<float>(), 0.f, 1e-6);
  out.loss.backward();
  expect_near(logp.grad(), {-.5f, .5f});
}

TEST(Cispo, ClipsTheWeightButKeepsEveryTokensGradient) {
  // Ratios 1.5, 0.5 with A = +1, clip [1.0, 0.28] (no floor): weights min(1.5, 1.28) = 1.28 and 0.5.
  // Value -A·w: (-1.28 - .5)/2 = -.89; gradient -A·w/2 = (-.64, -.25) — the first token,
  // which PPO's clip would drop, keeps its gradient (at the capped weight).
  at::Tensor logp = torch::log(torch::tensor({{1.5f, 0.5f}})).requires_grad_(true);
  PolicyLossInputs in{logp, torch::zeros({1, 2}), torch::ones({1, 2}), torch::ones({1, 2}), {}, {}};
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::cispo;
  cfg.clip_low = 1.0;
  cfg.clip_high = 0.28;
  auto out = policy_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<float>(), -.89f, 1e-6);
  EXPECT_NEAR(out.clip_frac, 0.5, 1e-9);
  out.loss.backward();
  expect_near(logp.grad(), {-.64f, -.25f});
}

TEST(Cispo, NegativeAdvantageIsCappedToo) {
  // Ratio 2.0, A = -1, clip [1.0, 0.28]: w = 1.28; value +1.28, gradient +1.28 (PPO: the
  // unclipped branch -A·r = 2 wins the max and its gradient is +2).
  at::Tensor logp = torch::log(torch::tensor({{2.f}})).requires_grad_(true);
  PolicyLossInputs in{logp, torch::zeros({1, 1}), -torch::ones({1, 1}), torch::ones({1, 1}), {}, {}};
  PolicyLossConfig cfg;
  cfg.kind = PolicyLossKind::cispo;
  cfg.clip_low = 1.0;
  cfg.clip_high = 0.28;
  auto out = policy_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<float>(), 1.28f, 1e-6);
  out.loss.backward();
  expect_near(logp.grad(), {1.28f});
}
