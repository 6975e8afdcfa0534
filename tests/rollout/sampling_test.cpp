// Token choice on hand-made logits: Philox matches Random123's known answers;
// temperature 0 is argmax; top-k, top-p and min-p restrict the support to
// exactly the tokens they should keep and the kept tokens are drawn with their
// renormalised probabilities (4000 draws, each frequency within 4.5 standard
// deviations); a row's draw depends on its (seed, prompt, sample, step) only,
// not on the rows beside it; log-probs are of the whole (tempered) vocabulary.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "hpcrl/rollout/philox.h"
#include "hpcrl/rollout/sampling.h"

namespace {

using namespace hpcrl;
using rollout::DrawKey;
using rollout::TokenFilter;

// Probabilities 0.405, 0.245, 0.149, 0.090, 0.055, 0.033, 0.020, 0.003 (sorted, distinct).
at::Tensor logits() { return at::tensor({2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f}); }

// `draws` rows of logits(), row i drawn at step i of sample 0 of prompt 0.
std::vector<int64_t> counts(const TokenFilter& filter, int draws = 4000, uint64_t seed = 1) {
  std::vector<DrawKey> keys;
  for (int i = 0; i < draws; ++i) keys.push_back({0, 0, i});
  at::Tensor rows = logits().unsqueeze(0).expand({draws, 8}).contiguous();
  at::Tensor ids = rollout::choose_tokens(rows, filter, rollout::draw_uniforms(seed, keys), false).ids;
  std::vector<int64_t> c(8, 0);
  for (int i = 0; i < draws; ++i) ++c[ids[i].item<int64_t>()];
  return c;
}

TokenFilter sampled(double temperature, int64_t top_k = 0, double top_p = 1.0, double min_p = 0.0) {
  return TokenFilter{temperature, top_k, top_p, min_p};
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

// probs restricted to tokens [0, n) and renormalised.
at::Tensor first_n(const at::Tensor& probs, int64_t n) {
  at::Tensor p = at::zeros({8});
  p.narrow(0, 0, n).copy_(probs.narrow(0, 0, n) / probs.narrow(0, 0, n).sum());
  return p;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  using B = rollout::PhiloxBlock;
  EXPECT_EQ(rollout::philox4x32_10({0, 0, 0, 0}, {0, 0}), (B{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(rollout::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (B{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(rollout::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (B{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Sampling, TemperatureZeroIsArgmaxWhateverTheFilters) {
  at::Tensor l = at::tensor({0.1f, 0.7f, 3.0f, -1.0f, 2.999f}).unsqueeze(0);
  EXPECT_EQ(rollout::choose_tokens(l, sampled(0.0), {}, false).ids.item<int64_t>(), 2);
  EXPECT_EQ(rollout::choose_tokens(l, sampled(0.0, 1, 0.1, 0.5), {}, false).ids.item<int64_t>(), 2);
}

TEST(Sampling, TemperatureScalesTheDistribution) {
  expect_distribution(counts(sampled(1.0)), logits().softmax(0));
  expect_distribution(counts(sampled(0.5)), (logits() / 0.5).softmax(0));
  expect_distribution(counts(sampled(2.0)), (logits() / 2.0).softmax(0));
}

TEST(Sampling, TopKKeepsExactlyTheKMostLikelyTokens) {
  auto c = counts(sampled(1.0, 3));
  expect_distribution(c, first_n(logits().softmax(0), 3));
  for (int64_t i = 0; i < 3; ++i) EXPECT_GT(c[i], 0);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // Cumulative mass: 0.405, 0.650, 0.799, ... so top_p = 0.7 keeps tokens 0..2.
  at::Tensor full = logits().softmax(0);
  ASSERT_LT(full.narrow(0, 0, 2).sum().item<double>(), 0.7);
  ASSERT_GE(full.narrow(0, 0, 3).sum().item<double>(), 0.7);
  expect_distribution(counts(sampled(1.0, 0, 0.7)), first_n(full, 3));
  // A top_p below the largest probability keeps only the top token.
  EXPECT_EQ(counts(sampled(1.0, 0, 0.2), 200)[0], 200);
}

TEST(Sampling, TopPAppliesToTheTopKRenormalisedDistribution) {
  // Top 4 renormalised: 0.455, 0.276, 0.167, 0.101 (cumulative 0.455, 0.731, ...):
  // top_p = 0.7 then keeps tokens 0 and 1 — where top_p alone keeps 0..2.
  expect_distribution(counts(sampled(1.0, 4, 0.7)), first_n(logits().softmax(0), 2));
}

TEST(Sampling, MinPKeepsTokensAtLeastMinPTimesTheMostLikely) {
  // min_p = 0.3: threshold 0.3 × 0.405 = 0.1215 keeps 0.405, 0.245, 0.149 and drops 0.090.
  expect_distribution(counts(sampled(1.0, 0, 1.0, 0.3)), first_n(logits().softmax(0), 3));
}

TEST(Sampling, ARowsDrawDependsOnItsKeyNotOnTheRowsBesideIt) {
  const at::Tensor two = at::stack({logits(), logits().flip(0)});  // [2, 8]
  std::vector<DrawKey> keys{{5, 1, 9}, {2, 3, 4}};
  at::Tensor together = rollout::choose_tokens(two, sampled(1.0), rollout::draw_uniforms(7, keys), true).ids;
  for (int r = 0; r < 2; ++r) {
    at::Tensor alone = rollout::choose_tokens(two.narrow(0, r, 1), sampled(1.0),
                                              rollout::draw_uniforms(7, {keys[r]}), true).ids;
    EXPECT_EQ(alone.item<int64_t>(), together[r].item<int64_t>()) << "row " << r;
  }
}

TEST(Sampling, DrawsAreKeyedBySeedPromptSampleAndStep) {
  const double u = rollout::draw_uniform(7, 3, 1, 0);
  EXPECT_EQ(rollout::draw_uniform(7, 3, 1, 0), u);
  EXPECT_NE(rollout::draw_uniform(8, 3, 1, 0), u);
  EXPECT_NE(rollout::draw_uniform(7, 4, 1, 0), u);
  EXPECT_NE(rollout::draw_uniform(7, 3, 2, 0), u);
  EXPECT_NE(rollout::draw_uniform(7, 3, 1, 1), u);
  // (prompt, sample) and (sample, prompt) are different streams.
  EXPECT_NE(rollout::draw_uniform(7, 1, 2, 0), rollout::draw_uniform(7, 2, 1, 0));
  // 100,000 consecutive steps average to 1/2 within 4.5 standard deviations (sd = sqrt(1/12 / 1e5) = 0.00091).
  double sum = 0;
  for (int t = 0; t < 100000; ++t) sum += rollout::draw_uniform(7, 3, 1, t);
  EXPECT_NEAR(sum / 100000, 0.5, 4.5 * 0.00091);
}

TEST(Sampling, LogprobsAreOfTheWholeVocabularyTemperedOrNot) {
  // Token 0 (logit 2.0) under top_k = 1, temperature 0.5: the filter keeps only
  // token 0, but its log-prob is of the whole distribution.
  const at::Tensor row = logits().unsqueeze(0);
  rollout::ChosenTokens t = rollout::choose_tokens(row, sampled(0.5, 1), rollout::draw_uniforms(1, {{0, 0, 0}}), true);
  ASSERT_EQ(t.ids.item<int64_t>(), 0);
  EXPECT_NEAR(t.logprobs.item<float>(), (logits() / 0.5).log_softmax(0)[0].item<float>(), 1e-6);  // log 0.6327
  rollout::ChosenTokens u = rollout::choose_tokens(row, sampled(0.5, 1), rollout::draw_uniforms(1, {{0, 0, 0}}), false);
  EXPECT_NEAR(u.logprobs.item<float>(), logits().log_softmax(0)[0].item<float>(), 1e-6);  // untempered: log 0.4046
}

// softmax(logits / T) in float64 restricted by the filter the way sampling.h
// states it (top-k; top-p on the top-k-renormalised distribution; min-p against
// the most likely token) and renormalised.
std::vector<double> filtered_softmax(const at::Tensor& logits, const TokenFilter& f) {
  const at::Tensor l = logits.to(at::kDouble).contiguous();
  const int64_t V = l.size(0);
  std::vector<double> p(V);
  const double max = l.max().item<double>();
  for (int64_t v = 0; v < V; ++v) p[v] = std::exp((l[v].item<double>() - max) / f.temperature);
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  std::vector<bool> keep(V, true);
  if (f.top_k > 0)
    for (int64_t i = f.top_k; i < V; ++i) keep[order[i]] = false;
  if (f.top_p < 1.0) {
    double kept = 0, before = 0;
    for (int64_t v = 0; v < V; ++v) kept += keep[v] ? p[v] : 0;
    for (int64_t i = 0; i < V; ++i) {
      if (!keep[order[i]]) continue;
      if (before >= f.top_p) keep[order[i]] = false;
      before += p[order[i]] / kept;
    }
  }
  double total = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (p[v] < f.min_p) keep[v] = false;  // p[v] is relative to the most likely token (1)
    p[v] = keep[v] ? p[v] : 0;
    total += p[v];
  }
  for (double& q : p) q /= total;
  return p;
}

// Pearson's statistic of observed counts against expected probabilities, with
// the bins expecting fewer than 5 draws pooled (their draws too); a draw
// outside the support fails on its own. Returns {statistic, degrees of freedom}.
std::pair<double, int64_t> chi_square(const std::vector<int64_t>& observed, const std::vector<double>& p, int64_t n) {
  double stat = 0, pooled_expected = 0;
  int64_t bins = 0, pooled_observed = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] == 0) {
      EXPECT_EQ(observed[v], 0) << "token " << v << " is outside the filtered support";
      continue;
    }
    const double e = double(n) * p[v];
    if (e < 5) {
      pooled_expected += e;
      pooled_observed += observed[v];
      continue;
    }
    stat += (observed[v] - e) * (observed[v] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++bins;
  }
  return {stat, bins - 1};
}

// The 0.999 quantile of chi-square with df degrees of freedom (Wilson–Hilferty, z = 3.0902).
double chi_square_999(int64_t df) {
  const double a = 2.0 / (9.0 * double(df));
  return double(df) * std::pow(1 - a + 3.0902 * std::sqrt(a), 3);
}

TEST(Sampling, DrawsPassAChiSquareTestAgainstTheFilteredSoftmax) {
  // 1000 tokens (vector widths and several 256-entry blocks of the CPU row
  // kernels), 20,000 draws; float32 logits take the row kernels where no top-k
  // or top-p applies, float64 logits the tensor path. A correct sampler fails
  // at this 0.999 quantile for 1 seed in 1000; the seed is fixed.
  at::manual_seed(5);
  const at::Tensor row = at::randn({1000}) * 2;
  const int64_t draws = 20000, chunk = 2500;
  for (const TokenFilter& f : {sampled(1.0), sampled(0.7, 0, 1.0, 0.1), sampled(1.3, 40), sampled(1.0, 0, 0.8),
                               sampled(0.9, 100, 0.9, 0.02)})
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      std::vector<int64_t> observed(1000, 0);
      for (int64_t c0 = 0; c0 < draws; c0 += chunk) {
        std::vector<DrawKey> keys;
        for (int64_t i = c0; i < c0 + chunk; ++i) keys.push_back({3, 0, i});
        const at::Tensor rows = row.to(dtype).unsqueeze(0).expand({chunk, 1000}).contiguous();
        const at::Tensor ids = rollout::choose_tokens(rows, f, rollout::draw_uniforms(9, keys), false).ids;
        for (int64_t i = 0; i < chunk; ++i) ++observed[ids[i].item<int64_t>()];
      }
      const auto [stat, df] = chi_square(observed, filtered_softmax(row, f), draws);
      EXPECT_LT(stat, chi_square_999(df)) << "T " << f.temperature << " top_k " << f.top_k << " top_p " << f.top_p
                                          << " min_p " << f.min_p << " " << dtype << ": " << df << " degrees of freedom";
    }
}

TEST(Sampling, GreedyIsArgmaxWithTheWholeVocabularysLogprob) {
  // Wide rows: the CPU row kernels' vector lanes, blocks and last partial vector.
  at::manual_seed(6);
  const at::Tensor rows = at::randn({16, 1003}) * 3;
  const rollout::ChosenTokens chosen = rollout::choose_tokens(rows, sampled(0.0), {}, true);
  EXPECT_TRUE(chosen.ids.equal(rows.argmax(1)));
  const at::Tensor want = rows.log_softmax(1).gather(1, rows.argmax(1, true)).squeeze(1);
  EXPECT_TRUE(chosen.logprobs.allclose(want, 0, 1e-6)) << chosen.logprobs - want;
}

}  // namespace

namespace {
TEST(Sampling, TheDeviceDrawAndTheCpuScanAgree) {
  // choose_tokens scans on the CPU and searches a cumulative sum on a device;
  // on the same weights and uniforms both pick the same tokens, with the
  // filtered-out (zero) tokens never picked by either.
  at::manual_seed(3);
  at::Tensor w = (at::randn({64, 1000}) * 2).exp();
  w.masked_fill_(at::rand({64, 1000}) < 0.5, 0.0f);
  w.select(1, 0).fill_(1.0f);  // every row keeps a token
  std::vector<DrawKey> keys;
  for (int r = 0; r < 64; ++r) keys.push_back({r, 0, 0});
  const at::Tensor u = rollout::draw_uniforms(11, keys);
  const at::Tensor scan = rollout::detail::inverse_cdf_by_scan(w, w.sum(1, false, at::kDouble), u);
  const at::Tensor search = rollout::detail::inverse_cdf_by_search(w, u);
  EXPECT_TRUE(scan.equal(search)) << scan << search;
  EXPECT_TRUE((w.gather(1, scan.unsqueeze(1)) > 0).all().item<bool>());
}
}  // namespace
