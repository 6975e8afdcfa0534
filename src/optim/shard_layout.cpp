// Bucket and shard arithmetic of sharded optimizers (see shard_layout.h).
#include "hpcrl/optim/shard_layout.h"

#include <algorithm>
#include <functional>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

namespace {
void append(ShardLayout::Bucket& b, size_t param, int64_t numel) {
  b.params.push_back(param);
  b.offsets.push_back(b.numel);
  b.numel += numel;
}

// Whether parameter k asks for a bucket of its own; `alone` is empty (none
// does) or holds one flag per parameter, checked here for `layout`.
class AloneFlags {
 public:
  AloneFlags(const std::vector<bool>& alone, size_t params, const char* layout) : alone_(alone) {
    HPCRL_CHECK(alone.empty() || alone.size() == params,
                layout << ": " << alone.size() << " flags for " << params << " parameters");
  }
  bool operator()(size_t k) const { return !alone_.empty() && alone_[k]; }

 private:
  const std::vector<bool>& alone_;
};
}  // namespace

ShardLayout ShardLayout::whole(const std::vector<int64_t>& numels, int size, int rank) {
  ShardLayout l;
  l.size = size;
  l.rank = rank;
  if (!numels.empty()) {
    l.buckets.emplace_back();
    for (size_t i = 0; i < numels.size(); ++i) append(l.buckets.back(), i, numels[i]);
  }
  l.finish(numels);
  return l;
}

ShardLayout ShardLayout::bucketed(const std::vector<int64_t>& numels, int64_t bucket_elements, int size, int rank,
                                  const std::vector<bool>& alone) {
  HPCRL_CHECK(bucket_elements > 0, "a bucketed shard layout needs a positive bucket size");
  const AloneFlags is_alone(alone, numels.size(), "bucketed");
  ShardLayout l;
  l.size = size;
  l.rank = rank;
  bool closed = true;  // the last bucket takes no more parameters
  for (size_t k = numels.size(); k-- > 0;) {
    if (closed || is_alone(k) || (l.buckets.back().numel > 0 && l.buckets.back().numel + numels[k] > bucket_elements))
      l.buckets.emplace_back();
    append(l.buckets.back(), k, numels[k]);
    closed = is_alone(k);
  }
  l.finish(numels);
  return l;
}

ShardLayout ShardLayout::by_units(const std::vector<int64_t>& numels, const std::vector<int64_t>& units, int size,
                                  int rank, const std::vector<bool>& alone) {
  HPCRL_CHECK(units.size() == numels.size(), "by_units: " << units.size() << " units for " << numels.size()
                                                          << " parameters");
  const AloneFlags is_alone(alone, numels.size(), "by_units");
  std::vector<int64_t> order(units);
  std::sort(order.begin(), order.end(), std::greater<int64_t>());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  ShardLayout l;
  l.size = size;
  l.rank = rank;
  auto open = [&](int64_t u) -> Bucket& {
    l.buckets.emplace_back();
    l.buckets.back().unit = u;
    return l.buckets.back();
  };
  for (int64_t u : order) {
    for (size_t k = 0; k < numels.size(); ++k)
      if (units[k] == u && is_alone(k)) append(open(u), k, numels[k]);
    Bucket* rest = nullptr;
    for (size_t k = 0; k < numels.size(); ++k)
      if (units[k] == u && !is_alone(k)) append(rest ? *rest : *(rest = &open(u)), k, numels[k]);
  }
  l.finish(numels);
  return l;
}

void ShardLayout::finish(const std::vector<int64_t>& numels) {
  HPCRL_CHECK(size >= 1 && rank >= 0 && rank < size, "shard layout: rank " << rank << " of a group of " << size);
  for (Bucket& b : buckets) {
    b.shard = (b.numel + size - 1) / size;
    b.shard_offset = shard;
    shard += b.shard;
    numel += b.numel;
    const int64_t lo = rank * b.shard, hi = lo + b.shard;  // this rank's part of the bucket's flat buffer
    for (size_t j = 0; j < b.params.size(); ++j) {
      const int64_t start = b.offsets[j], end = start + numels[b.params[j]];
      const int64_t a = std::max(lo, start), z = std::min(hi, end);
      if (a < z) segments.push_back({b.params[j], a - start, b.shard_offset + a - lo, z - a});
    }
  }
}

}  // namespace hpcrl::optim
