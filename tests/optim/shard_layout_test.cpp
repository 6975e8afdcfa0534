// ShardLayout's bucket and shard arithmetic with literal sizes: which
// parameters share a bucket, Sb = ceil(Nb / W), and which elements a rank owns.
#include <gtest/gtest.h>

#include "hpcrl/optim/shard_layout.h"

using hpcrl::optim::ShardLayout;

namespace {
std::vector<std::vector<size_t>> bucket_params(const ShardLayout& l) {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : l.buckets) out.push_back(b.params);
  return out;
}
}  // namespace

TEST(ShardLayout, BucketedFillsFromTheLastParameter) {
  // Sizes 4, 3, 2, 5 with buckets of at most 6: {5} then 2 + 3 = 5 ≤ 6, then 4 (5 + 4 > 6).
  ShardLayout l = ShardLayout::bucketed({4, 3, 2, 5}, 6, 2, 0);
  EXPECT_EQ(bucket_params(l), (std::vector<std::vector<size_t>>{{3}, {2, 1}, {0}}));
  // Sb = ceil(5/2) + ceil(5/2) + ceil(4/2) = 3 + 3 + 2.
  EXPECT_EQ(l.shard, 8);
  EXPECT_EQ(l.numel, 14);
}

TEST(ShardLayout, BucketedGivesAnAloneParameterABucketOfItsOwn) {
  // Parameter 0 alone: without the flag 3 + 4 = 7 ≤ 8 would share a bucket.
  ShardLayout l = ShardLayout::bucketed({4, 3, 1}, 8, 2, 1, {true, false, false});
  EXPECT_EQ(bucket_params(l), (std::vector<std::vector<size_t>>{{2, 1}, {0}}));
  // Alone in the middle: the bucket before it closes, and the one after starts fresh.
  ShardLayout m = ShardLayout::bucketed({1, 2, 3, 4}, 100, 1, 0, {false, false, true, false});
  EXPECT_EQ(bucket_params(m), (std::vector<std::vector<size_t>>{{3}, {2}, {1, 0}}));
}

TEST(ShardLayout, AloneParameterOwnsTheSameElementsWhateverItsNeighbours) {
  // The tied embedding (10 elements) on a first stage alone and on a last stage
  // beside a final norm of 3, over W = 4: rank 2 owns elements [6, 9) of it on both.
  for (int rank = 0; rank < 4; ++rank) {
    ShardLayout first = ShardLayout::by_units({10}, {-1}, 4, rank, {true});
    ShardLayout last = ShardLayout::by_units({10, 3}, {-1, -1}, 4, rank, {true, false});
    const auto& a = first.buckets.at(0);
    const auto& b = last.buckets.at(0);
    ASSERT_EQ(b.params, (std::vector<size_t>{0})) << "alone parameters come first in their unit";
    EXPECT_EQ(a.shard, 3);  // ceil(10 / 4)
    EXPECT_EQ(b.shard, 3);
    EXPECT_EQ(first.segments.front().param_offset, last.segments.front().param_offset) << "rank " << rank;
    EXPECT_EQ(first.segments.front().length, last.segments.front().length) << "rank " << rank;
  }
  // Without the flag the last stage's unit is one bucket of 13: Sb = 4, rank 2 would own [8, 10) of it.
  ShardLayout shared = ShardLayout::by_units({10, 3}, {-1, -1}, 4, 2);
  ASSERT_EQ(shared.buckets.size(), 1u);
  EXPECT_EQ(shared.segments.front().param_offset, 8);
  EXPECT_EQ(shared.segments.front().length, 2);
}

TEST(ShardLayout, ByUnitsRunsFromTheLastLayerToTheOuterUnit) {
  // Units of parameters: outer, layer 0, layer 0, layer 1, outer.
  ShardLayout l = ShardLayout::by_units({5, 1, 1, 1, 5}, {-1, 0, 0, 1, -1}, 1, 0);
  EXPECT_EQ(bucket_params(l), (std::vector<std::vector<size_t>>{{3}, {1, 2}, {0, 4}}));
  EXPECT_EQ(l.buckets[0].unit, 1);
  EXPECT_EQ(l.buckets[2].unit, -1);
}
