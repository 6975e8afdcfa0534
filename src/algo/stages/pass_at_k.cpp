// Unbiased pass@k (see pass_at_k.h).
#include "hpcrl/algo/stages/pass_at_k.h"

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

double pass_at_k(int64_t n, int64_t correct, int64_t k) {
  HPCRL_CHECK(k >= 1 && k <= n, "pass@" << k << " needs 1 <= k <= n, with n = " << n << " samples");
  HPCRL_CHECK(correct >= 0 && correct <= n, correct << " correct of " << n << " samples is impossible");
  // Fewer wrong samples than k: every draw of k contains a correct one.
  if (n - correct < k) return 1.0;
  double all_wrong = 1.0;  // C(n-c, k) / C(n, k)
  for (int64_t i = n - correct + 1; i <= n; ++i) all_wrong *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - all_wrong;
}

std::vector<int64_t> pass_at_k_values(int64_t n) {
  HPCRL_CHECK(n >= 1, "pass@k needs at least one sample per problem, got n = " << n);
  std::vector<int64_t> ks;
  for (int64_t k = 1; k < n; k *= 2) ks.push_back(k);
  ks.push_back(n);
  return ks;
}

std::map<int64_t, double> mean_pass_at_k(const std::vector<SampleCounts>& problems) {
  std::map<int64_t, double> out;
  if (problems.empty()) return out;
  int64_t min_n = problems.front().n;
  for (const auto& p : problems) min_n = std::min(min_n, p.n);
  for (int64_t k : pass_at_k_values(min_n)) {
    double sum = 0;
    for (const auto& p : problems) sum += pass_at_k(p.n, p.correct, k);
    out[k] = sum / static_cast<double>(problems.size());
  }
  return out;
}

}  // namespace hpcrl::algo
