// Per-token staleness (token_staleness.h).
#include "hpcrl/algo/training/token_staleness.h"

#include <algorithm>
#include <string>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
constexpr size_t kSamples = 0, kSpanning = 1, kTokens = 2, kStalenessSum = 3, kFirstBucket = 4;

}  // namespace

bool token_too_stale(const std::vector<int32_t>& versions, int64_t version, int64_t max_staleness) {
  return !versions.empty() && version - *std::min_element(versions.begin(), versions.end()) > max_staleness;
}

int64_t drop_stale_groups(RolloutSamples& kept, int64_t group, int64_t version, int64_t max_staleness) {
  HPCRL_CHECK(group >= 1 && kept.size() % size_t(group) == 0,
              "drop_stale_groups: " << kept.size() << " samples in groups of " << group);
  RolloutSamples fresh;
  for (size_t first = 0; first < kept.size(); first += size_t(group)) {
    bool stale = false;
    for (size_t k = first; k < first + size_t(group) && k < kept.versions.size(); ++k)
      stale = stale || token_too_stale(kept.versions[k], version, max_staleness);
    if (!stale) fresh.append(kept, first, size_t(group));
  }
  const int64_t dropped = int64_t(kept.size() - fresh.size());
  kept = std::move(fresh);
  return dropped;
}

std::vector<double> staleness_counts(const RolloutSamples& kept, int64_t version, int64_t max_staleness) {
  std::vector<double> c(kFirstBucket + size_t(max_staleness) + 1, 0.0);
  for (size_t k = 0; k < kept.size() && k < kept.versions.size(); ++k) {
    const auto& v = kept.versions[k];
    c[kSamples] += 1;
    if (!v.empty() && *std::min_element(v.begin(), v.end()) != *std::max_element(v.begin(), v.end()))
      c[kSpanning] += 1;
    for (int32_t token_version : v) {
      const int64_t s = std::clamp<int64_t>(version - token_version, 0, max_staleness);
      c[kTokens] += 1;
      c[kStalenessSum] += double(s);
      c[kFirstBucket + size_t(s)] += 1;
    }
  }
  return c;
}

int64_t max_token_staleness(const std::vector<double>& c) {
  int64_t max = 0;
  for (size_t b = kFirstBucket; b < c.size(); ++b)
    if (c[b] > 0) max = int64_t(b - kFirstBucket);
  return max;
}

void add_staleness_metrics(const std::vector<double>& c, RlMetrics& m) {
  const double tokens = std::max(c[kTokens], 1.0);
  m.extra.emplace_back("staleness/mean", c[kStalenessSum] / tokens);
  m.extra.emplace_back("staleness/max", double(max_token_staleness(c)));
  m.extra.emplace_back("staleness/spanning_samples", c[kSpanning] / std::max(c[kSamples], 1.0));
  for (size_t b = kFirstBucket; b < c.size(); ++b)
    m.extra.emplace_back("staleness/tokens_" + std::to_string(b - kFirstBucket), c[b] / tokens);
}

}  // namespace hpcrl::algo
