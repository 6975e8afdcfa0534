// pass@k against values computed by hand from 1 - C(n-c, k) / C(n, k), the
// edge cases c = 0 and c = n, large n where binomials overflow, and the k list.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "hpcrl/algo/stages/pass_at_k.h"
#include "hpcrl/util/error.h"

namespace {

using hpcrl::algo::mean_pass_at_k;
using hpcrl::algo::pass_at_k;
using hpcrl::algo::pass_at_k_values;

TEST(PassAtK, HandComputedValues) {
  // n = 5, c = 2: C(3,1)/C(5,1) = 3/5; C(3,2)/C(5,2) = 3/10; C(3,3)/C(5,3) = 1/10; k = 4, 5 > n - c.
  EXPECT_NEAR(pass_at_k(5, 2, 1), 0.4, 1e-15);
  EXPECT_NEAR(pass_at_k(5, 2, 2), 0.7, 1e-15);
  EXPECT_NEAR(pass_at_k(5, 2, 3), 0.9, 1e-15);
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 4), 1.0);
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 5), 1.0);
  // n = 10, c = 3, k = 4: 1 - C(7,4)/C(10,4) = 1 - 35/210 = 5/6.
  EXPECT_NEAR(pass_at_k(10, 3, 4), 5.0 / 6.0, 1e-15);
  // n = 8, c = 1: pass@k = k/8 exactly.
  for (int k = 1; k <= 8; ++k) EXPECT_NEAR(pass_at_k(8, 1, k), k / 8.0, 1e-15) << k;
  // pass@1 is the fraction correct for every n and c.
  for (int n = 1; n <= 12; ++n)
    for (int c = 0; c <= n; ++c) EXPECT_NEAR(pass_at_k(n, c, 1), double(c) / n, 1e-15) << n << " " << c;
}

TEST(PassAtK, NoneCorrectIsZeroAllCorrectIsOne) {
  for (int n : {1, 2, 7, 64})
    for (int k = 1; k <= n; ++k) {
      EXPECT_EQ(pass_at_k(n, 0, k), 0.0) << n << " " << k;
      EXPECT_EQ(pass_at_k(n, n, k), 1.0) << n << " " << k;
    }
}

TEST(PassAtK, StableWhereBinomialsOverflow) {
  // C(200, 100) ≈ 9e58 has no exact double; compare with log-gamma in long double.
  auto reference = [](int n, int c, int k) {
    auto lchoose = [](long double a, long double b) {
      return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1);
    };
    return 1.0L - std::exp(lchoose(n - c, k) - lchoose(n, k));
  };
  using Case = std::tuple<int, int, int>;
  for (auto [n, c, k] : std::initializer_list<Case>{{200, 13, 100}, {1000, 1, 999}, {500, 250, 200}, {300, 3, 16}})
    EXPECT_NEAR(pass_at_k(n, c, k), double(reference(n, c, k)), 1e-12) << n << " " << c << " " << k;
}

TEST(PassAtK, ReportedKsArePowersOfTwoAndN) {
  EXPECT_EQ(pass_at_k_values(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(pass_at_k_values(2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(pass_at_k_values(5), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(pass_at_k_values(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(pass_at_k_values(100), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 100}));
}

TEST(PassAtK, MeanOverProblemsUsesEachProblemsOwnN) {
  // Problem A: 5 samples, 2 correct; B: 4 samples, 0 correct; C: 4 samples, 4 correct. Min n = 4.
  auto m = mean_pass_at_k({{5, 2}, {4, 0}, {4, 4}});
  ASSERT_EQ(m.size(), 3u);  // k = 1, 2, 4
  EXPECT_NEAR(m.at(1), (0.4 + 0 + 1) / 3, 1e-15);
  EXPECT_NEAR(m.at(2), (0.7 + 0 + 1) / 3, 1e-15);
  EXPECT_NEAR(m.at(4), (1.0 + 0 + 1) / 3, 1e-15);
  EXPECT_TRUE(mean_pass_at_k({}).empty());
}

TEST(PassAtK, RejectsKOutsideOneToN) {
  EXPECT_THROW(pass_at_k(4, 1, 0), hpcrl::RuntimeError);
  EXPECT_THROW(pass_at_k(4, 1, 5), hpcrl::RuntimeError);
  EXPECT_THROW(pass_at_k(4, 5, 2), hpcrl::RuntimeError);
}

}  // namespace
