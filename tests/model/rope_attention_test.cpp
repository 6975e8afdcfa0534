// RoPE against its closed form (plain and Llama-3 scaled), the causal/padding
// mask, and grouped-query attention against per-head attention computed
// independently in float64.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/model/rope.h"
#include "test_models.h"

namespace hpcrl::model {
namespace {

TEST(Rope, MatchesClosedFormRotation) {
  ModelArch arch = testing::tiny_arch();
  arch.head_dim = 16;
  arch.rope_theta = 500.0;
  const int64_t B = 2, T = 5, H = 3, D = 16;
  torch::manual_seed(1);
  at::Tensor x = torch::randn({B, T, H, D});
  at::Tensor pos = torch::tensor({0, 1, 2, 7, 40, 3, 9, 11, 12, 63}, torch::kLong).view({B, T});
  RotaryEmbedding rope(arch);
  at::Tensor y = apply_rotary(x, rope.tables(pos, at::kFloat));
  auto xa = x.accessor<float, 4>();
  auto ya = y.accessor<float, 4>();
  double max_err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          double angle = pos[b][t].item<int64_t>() * std::pow(500.0, -2.0 * i / D);
          double x1 = xa[b][t][h][i], x2 = xa[b][t][h][i + D / 2];
          max_err = std::max(max_err, std::abs(ya[b][t][h][i] - (x1 * std::cos(angle) - x2 * std::sin(angle))));
          max_err = std::max(max_err, std::abs(ya[b][t][h][i + D / 2] - (x2 * std::cos(angle) + x1 * std::sin(angle))));
        }
  EXPECT_LT(max_err, 2e-5);
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  ModelArch arch = testing::tiny_arch();
  RotaryEmbedding rope(arch);
  torch::manual_seed(2);
  at::Tensor q = torch::randn({1, 1, 1, arch.head_dim}), k = torch::randn({1, 1, 1, arch.head_dim});
  auto score = [&](int64_t m, int64_t n) {
    at::Tensor pm = torch::full({1, 1}, m, torch::kLong), pn = torch::full({1, 1}, n, torch::kLong);
    return (apply_rotary(q, rope.tables(pm, at::kFloat)) * apply_rotary(k, rope.tables(pn, at::kFloat))).sum().item<double>();
  };
  EXPECT_NEAR(score(5, 2), score(25, 22), 1e-4);
  EXPECT_NEAR(score(3, 3), score(40, 40), 1e-4);
  EXPECT_GT(std::abs(score(5, 2) - score(5, 4)), 1e-3);  // and it does depend on the distance
}

TEST(Rope, Llama3ScalingMatchesClosedForm) {
  RopeScaling s{"llama3", 8.0, 1.0, 4.0, 8192};
  const int64_t D = 128;
  const double theta = 500000.0;
  at::Tensor inv = 1.0 / torch::pow(theta, torch::arange(0, D, 2, torch::kDouble) / double(D));
  at::Tensor scaled = llama3_scaled_inv_freq(inv, s);
  int low = 0, high = 0, medium = 0;
  for (int64_t i = 0; i < D / 2; ++i) {
    double f = std::pow(theta, -2.0 * i / D), wavelen = 2 * M_PI / f, expected;
    if (wavelen < 8192.0 / 4.0) {
      expected = f, ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      expected = f / 8.0, ++low;
    } else {
      double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * f / 8.0 + smooth * f, ++medium;
    }
    EXPECT_NEAR(scaled[i].item<double>() / expected, 1.0, 1e-9) << "frequency " << i;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
  EXPECT_GT(medium, 0);  // all three regimes are exercised
}

TEST(AttentionMask, CausalPaddingAndCacheOffsets) {
  // No padding, no cache: plain causal (undefined = the kernel's causal path).
  EXPECT_FALSE(attention_mask({}, 4, 4).defined());
  // Two cached keys, two queries: query i sees keys 0..2+i.
  at::Tensor m = attention_mask({}, 2, 4).view({2, 4});
  EXPECT_TRUE(torch::equal(m, torch::tensor({1, 1, 1, 0, 1, 1, 1, 1}, torch::kBool).view({2, 4})));
  // Left padding: key 0 is padding; the padding query 0 still sees itself.
  at::Tensor valid = torch::tensor({0, 1, 1}, torch::kBool).view({1, 3});
  at::Tensor p = attention_mask(valid, 3, 3).view({3, 3});
  EXPECT_TRUE(torch::equal(p, torch::tensor({1, 0, 0, 0, 1, 0, 0, 1, 1}, torch::kBool).view({3, 3})));
}

// softmax(q·k / sqrt(D)) v for one head, in float64, with an explicit loop over keys.
at::Tensor naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3), Hkv = k.size(1), Tk = k.size(2);
  at::Tensor out = torch::zeros({B, H, Tq, D}, torch::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t kh = h / (H / Hkv);
        std::vector<double> w;
        double mx = -1e300;
        for (int64_t j = 0; j < Tk; ++j) {
          bool ok = allowed[b][0][i][j].item<bool>();
          double s = ok ? (q[b][h][i].to(torch::kDouble) * k[b][kh][j].to(torch::kDouble)).sum().item<double>() /
                              std::sqrt(double(D))
                        : -1e300;
          w.push_back(s);
          mx = std::max(mx, s);
        }
        double z = 0;
        for (auto& s : w) z += (s = s <= -1e299 ? 0 : std::exp(s - mx));
        for (int64_t j = 0; j < Tk; ++j) out[b][h][i] += w[j] / z * v[b][kh][j].to(torch::kDouble);
      }
  return out;
}

TEST(Attention, GroupedQueryAttentionMatchesPerHeadReference) {
  torch::manual_seed(3);
  const int64_t B = 2, H = 6, Hkv = 2, Tq = 3, Tk = 5, D = 4;
  at::Tensor q = torch::randn({B, H, Tq, D}), k = torch::randn({B, Hkv, Tk, D}), v = torch::randn({B, Hkv, Tk, D});
  at::Tensor valid = torch::tensor({1, 1, 1, 1, 1, 0, 1, 1, 1, 1}, torch::kBool).view({B, Tk});
  at::Tensor allowed = attention_mask(valid, Tq, Tk);
  at::Tensor expected = naive_attention(q, k, v, allowed.expand({B, 1, Tq, Tk}));
  EXPECT_LT((attend_reference(q, k, v, allowed).to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5);
  EXPECT_LT((attend(q, k, v, allowed).to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5);
  // GQA equals multi-head attention with each KV head repeated for its query heads.
  at::Tensor mha = attend(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), allowed);
  EXPECT_LT((attend(q, k, v, allowed) - mha).abs().max().item<float>(), 1e-6);
}

TEST(Attention, CausalDefaultEqualsExplicitMask) {
  torch::manual_seed(4);
  at::Tensor q = torch::randn({1, 4, 6, 8}), k = torch::randn({1, 2, 6, 8}), v = torch::randn({1, 2, 6, 8});
  at::Tensor explicit_mask = attention_mask(torch::ones({1, 6}, torch::kBool), 6, 6);
  EXPECT_LT((attend(q, k, v, {}) - attend(q, k, v, explicit_mask)).abs().max().item<float>(), 1e-6);
  at::Tensor expected = naive_attention(q, k, v, explicit_mask);
  EXPECT_LT((attend(q, k, v, {}).to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace hpcrl::model
