// Training on multi-turn trajectories: the tokens a tool call inserted (a
// reply) are in the rows — later tokens attend to them — but their own terms
// count for nothing. Each objective's loss and gradient over rows with
// inserted tokens (given garbage log-probs, advantages and entropies there)
// equal those over the same rows with those columns cut out by hand; GAE and
// REINFORCE++ returns run over the model's tokens as if the replies were not
// there.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/objectives/sequence_ratio.h"
#include "hpcrl/algo/training/token_batch.h"

namespace {

using namespace hpcrl;
using namespace hpcrl::algo;

// Row 0: prompt [1, 2], response [3, 4, 5, 6, 7] with 4 and 5 inserted (a reply);
// row 1: prompt [1, 2, 3], response [8, 9, 10, 11] with 9 inserted.
TokenBatch two_rows() {
  const std::vector<std::vector<uint8_t>> sampled = {{1, 1, 0, 0, 1}, {1, 0, 1, 1}};
  return make_token_batch({{1, 2}, {1, 2, 3}}, {{3, 4, 5, 6, 7}, {8, 9, 10, 11}}, 0, 1, at::kCPU, &sampled);
}

TEST(MultiTurnMask, InsertedTokensAreOutOfTheLossMask) {
  // Row 0's response token k is predicted at column P − 1 + k = 1 + k: columns
  // 1, 2 (sampled), 3, 4 (inserted), 5 (sampled); row 1's at 2 + k.
  const TokenBatch b = two_rows();
  EXPECT_TRUE(b.loss_mask[0].equal(torch::tensor({0.f, 1.f, 1.f, 0.f, 0.f, 1.f, 0.f})));
  EXPECT_TRUE(b.loss_mask[1].equal(torch::tensor({0.f, 0.f, 1.f, 0.f, 1.f, 1.f, 0.f})));
  EXPECT_EQ(b.attention_mask[0].sum().item<int64_t>(), 7);  // every token stays in the row
  EXPECT_EQ(response_sampled(b, 0), (std::vector<uint8_t>{1, 1, 0, 0, 1}));
  EXPECT_EQ(response_sampled(b, 1), (std::vector<uint8_t>{1, 0, 1, 1}));
}

// The columns of `t` where `mask` is 1, left-aligned per row (zero-padded to the widest row).
at::Tensor compact(const at::Tensor& t, const at::Tensor& mask) {
  const int64_t width = mask.sum(1).max().item<int64_t>();
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < t.size(0); ++i) {
    at::Tensor kept = t[i].masked_select(mask[i] > 0);
    rows.push_back(at::constant_pad_nd(kept, {0, width - kept.size(0)}));
  }
  return at::stack(rows);
}

struct LossAndGrad {
  double loss;
  at::Tensor grad;  // d loss / d logp
};

LossAndGrad loss_of(const at::Tensor& logp_values, const PolicyLossInputs& given, const PolicyLossConfig& cfg) {
  PolicyLossInputs in = given;
  in.logp = logp_values.clone().requires_grad_(true);
  if (cfg.kind == config::PolicyLossKind::gspo || cfg.kind == config::PolicyLossKind::gspo_token) {
    const at::Tensor rows = at::arange(in.mask.size(0), at::kLong).unsqueeze(1).expand_as(in.mask);
    in.seq_log_ratio = sequence_log_ratio((in.logp - in.old_logp).detach(), in.mask, rows, in.mask.sum(1), nullptr);
  }
  at::Tensor loss = policy_loss(in, cfg).loss;
  loss.backward();
  return {loss.item<double>(), in.logp.grad()};
}

TEST(MultiTurnMask, EveryObjectivesLossAndGradientIgnoreInsertedTokens) {
  const TokenBatch b = two_rows();
  const at::Tensor mask = b.loss_mask;
  const at::Tensor inserted = (b.attention_mask > 0) & (mask == 0) & (at::arange(7).unsqueeze(0) >= 2);
  at::manual_seed(5);
  // Values at inserted columns are garbage (±9): counting any of them moves the loss by far more than 1e-5.
  auto with_garbage = [&](at::Tensor t) { return at::where(inserted, 9.0 * at::randn_like(t), t); };
  const at::Tensor logp = with_garbage(-at::rand({2, 7}) - 0.1);
  PolicyLossInputs in;
  in.old_logp = with_garbage(logp + 0.3 * at::randn({2, 7}));
  in.advantages = with_garbage(at::randn({2, 7}));
  in.ref_logp = with_garbage(logp + 0.2 * at::randn({2, 7}));
  in.entropy = with_garbage(at::rand({2, 7}));
  in.mask = mask;
  PolicyLossInputs cut;
  cut.old_logp = compact(in.old_logp, mask);
  cut.advantages = compact(in.advantages, mask);
  cut.ref_logp = compact(in.ref_logp, mask);
  cut.entropy = compact(in.entropy, mask);
  cut.mask = compact(mask, mask);
  for (auto kind : {config::PolicyLossKind::ppo_clip, config::PolicyLossKind::gspo, config::PolicyLossKind::gspo_token,
                    config::PolicyLossKind::cispo})
    for (auto agg : {config::LossAgg::token_mean, config::LossAgg::seq_mean_token_sum,
                     config::LossAgg::seq_mean_token_mean}) {
      PolicyLossConfig cfg;
      cfg.kind = kind;
      cfg.agg = agg;
      cfg.kl_coef = 0.1;
      cfg.entropy_coef = 0.01;
      if (kind == config::PolicyLossKind::gspo || kind == config::PolicyLossKind::gspo_token)
        cfg.clip_low = 3e-4, cfg.clip_high = 4e-4;
      const std::string what = config::to_string(kind) + " / " + config::to_string(agg);
      const LossAndGrad full = loss_of(logp, in, cfg);
      const LossAndGrad by_hand = loss_of(compact(logp, mask), cut, cfg);
      EXPECT_NEAR(full.loss, by_hand.loss, 1e-6) << what;
      EXPECT_EQ(full.grad.masked_select(inserted).abs().max().item<float>(), 0.0f) << what;
      EXPECT_TRUE(compact(full.grad, mask).allclose(by_hand.grad, 1e-6, 1e-7)) << what;
    }
}

TEST(MultiTurnMask, GaeRunsOverTheModelsTokensAcrossAReply) {
  // γ = 1, λ = .5 over row 0's sampled columns 1, 2, 5 (values .5, .6, .7, reward 1
  // at the last): as the hand-worked recursion over [.5, .6, .7] with the reply's
  // columns 3, 4 (value 9, reward 9: garbage) passed over: A = [.225, .25, .3].
  const at::Tensor mask = torch::tensor({{0.f, 1.f, 1.f, 0.f, 0.f, 1.f, 0.f}});
  const at::Tensor values = torch::tensor({{0.f, .5f, .6f, 9.f, 9.f, .7f, 0.f}});
  const at::Tensor rewards = torch::tensor({{0.f, 0.f, 0.f, 9.f, 9.f, 1.f, 0.f}});
  const GaeResult r = gae(rewards, values, mask, 1.0, 0.5, /*whiten=*/false);
  EXPECT_TRUE(r.advantages.allclose(torch::tensor({{0.f, .225f, .25f, 0.f, 0.f, .3f, 0.f}}), 1e-6, 1e-6))
      << r.advantages;
}

TEST(MultiTurnMask, TheScoreLandsOnTheLastSampledToken) {
  // Row 1's last response token (column 5) was sampled; the KL of the inserted column 3 is masked.
  const at::Tensor mask = two_rows().loss_mask;
  const at::Tensor shaped = kl_shaped_rewards(torch::tensor({0.f, 2.f}), at::ones({2, 7}), mask, 0.1);
  EXPECT_TRUE(shaped[1].allclose(torch::tensor({0.f, 0.f, -.1f, 0.f, -.1f, 1.9f, 0.f})));
}

}  // namespace
