// pass@k: the probability that at least one of k samples of a problem is
// correct, estimated without bias from n ≥ k samples of which c were correct
// (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
//   pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)
// The product form never forms a binomial coefficient, so it stays exact to
// rounding for any n (C(200, 100) alone overflows a double's integers).
// `hpcrl eval` reports the mean over problems for k in pass_at_k_values(n).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace hpcrl::algo {

// One problem's samples: how many were drawn and how many the verifier accepted.
struct SampleCounts {
  int64_t n = 0;
  int64_t correct = 0;
};

// Unbiased pass@k of one problem. Requires 1 ≤ k ≤ n and 0 ≤ correct ≤ n
// (RuntimeError otherwise: callers choose k from the data they hold).
double pass_at_k(int64_t n, int64_t correct, int64_t k);

// The k reported for n samples per problem: 1, every power of two below n, and n
// (n = 1 → {1}; n = 5 → {1, 2, 4, 5}; n = 8 → {1, 2, 4, 8}).
std::vector<int64_t> pass_at_k_values(int64_t n);

// Mean pass@k over problems for each k in pass_at_k_values(min n). Each problem
// uses its own n, so problems with more samples than others still count fully.
// Empty input → empty map.
std::map<int64_t, double> mean_pass_at_k(const std::vector<SampleCounts>& problems);

}  // namespace hpcrl::algo
