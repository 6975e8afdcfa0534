// reshard(): the cut of a ZeRO shard out of shards saved by a group of another
// size, on literal flat states. Buckets of 5 and 3 elements:
//   2 ranks: Sb = ceil(5/2), ceil(3/2) = 3, 2
//     rank 0 [10 11 12 | 20 21]   rank 1 [13 14 pad | 22 pad]
//   3 ranks: Sb = 2, 1
//     rank 0 [10 11 | 20]   rank 1 [12 13 | 21]   rank 2 [14 pad | 22]
// with padding 0.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "hpcrl/optim/reshard.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;

namespace {
const std::vector<int64_t> kBuckets{5, 3};

std::vector<float> values(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// The shards of `saved`, each a literal row, and a count of the loads.
struct Saved {
  std::vector<std::vector<float>> shards;
  std::vector<int> loads = std::vector<int>(8, 0);
  at::Tensor operator()(int q) {
    ++loads.at(size_t(q));
    return at::tensor(shards.at(size_t(q)), at::kFloat);
  }
};

std::vector<float> cut(Saved& saved, int size, int rank) {
  return values(optim::reshard(kBuckets, int(saved.shards.size()), std::ref(saved), size, rank, at::kFloat));
}
}  // namespace

TEST(Reshard, TwoRanksToThreeCutsEachBucketAtItsNewSlices) {
  Saved two{{{10, 11, 12, 20, 21}, {13, 14, 0, 22, 0}}};
  EXPECT_EQ(cut(two, 3, 0), (std::vector<float>{10, 11, 20}));
  EXPECT_EQ(cut(two, 3, 1), (std::vector<float>{12, 13, 21}));
  EXPECT_EQ(cut(two, 3, 2), (std::vector<float>{14, 0, 22}));  // bucket 0's sixth slot is padding
}

TEST(Reshard, ThreeRanksToOneIsTheFlatStateWithoutPadding) {
  Saved three{{{10, 11, 20}, {12, 13, 21}, {14, 0, 22}}};
  EXPECT_EQ(cut(three, 1, 0), (std::vector<float>{10, 11, 12, 13, 14, 20, 21, 22}));
}

TEST(Reshard, OneRankToTwoAndBackIsTheSameState) {
  Saved one{{{10, 11, 12, 13, 14, 20, 21, 22}}};
  Saved two{{cut(one, 2, 0), cut(one, 2, 1)}};
  EXPECT_EQ(two.shards[0], (std::vector<float>{10, 11, 12, 20, 21}));
  EXPECT_EQ(two.shards[1], (std::vector<float>{13, 14, 0, 22, 0}));
  EXPECT_EQ(cut(two, 1, 0), one.shards[0]);
}

TEST(Reshard, ReadsOnlyTheSavedShardsThatHoldItsElementsEachOnce) {
  Saved two{{{10, 11, 12, 20, 21}, {13, 14, 0, 22, 0}}};
  cut(two, 3, 0);  // 10 11 | 20: all in saved rank 0
  EXPECT_EQ(two.loads[0], 1);
  EXPECT_EQ(two.loads[1], 0);
  cut(two, 3, 1);  // 12 from rank 0, 13 from rank 1, 21 from rank 0
  EXPECT_EQ(two.loads[0], 2);
  EXPECT_EQ(two.loads[1], 1);
}

TEST(Reshard, ASavedShardOfAnotherLengthIsAnInputError) {
  Saved damaged{{{10, 11, 12, 20}, {13, 14, 0, 22, 0}}};  // rank 0 lost an element
  try {
    cut(damaged, 1, 0);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("saved optimizer shard of group rank 0 has 4 elements where its layout "
                                         "gives 5; the checkpoint is damaged"),
              std::string::npos) << e.what();
  }
}
