// What the benchmarks time with: a steady clock, the seconds since a point,
// and the median of their rounds (the upper one of an even count). Medians,
// since these machines are shared and noisy.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace hpcrl::bench {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace hpcrl::bench
