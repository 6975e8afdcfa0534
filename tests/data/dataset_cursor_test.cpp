// Epoch shuffling and the checkpointable cursor: every epoch is a permutation,
// a restored cursor continues with exactly the same batches, and dp ranks
// take disjoint slices that together are the single-rank global batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::io;

namespace {
std::vector<size_t> sorted(std::vector<size_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<size_t> iota(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}
}  // namespace

TEST(DataSampler, EachEpochIsAPermutationThatDependsOnSeedAndEpoch) {
  DataSampler s(100, 7);
  auto e0 = s.epoch_order(0), e1 = s.epoch_order(1);
  EXPECT_EQ(sorted(e0), iota(100));
  EXPECT_EQ(sorted(e1), iota(100));
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, iota(100));
  EXPECT_EQ(e0, DataSampler(100, 7).epoch_order(0));
  EXPECT_NE(e0, DataSampler(100, 8).epoch_order(0));
  EXPECT_EQ(DataSampler(100, 7, /*shuffle=*/false).epoch_order(3), iota(100));
}

TEST(DataSampler, OrderIsPinnedAcrossBuilds) {
  // Checkpoints written by one build must resume identically in another: the
  // order is a fixed function of (seed, epoch), pinned here.
  EXPECT_EQ(DataSampler(10, 1).epoch_order(0), (std::vector<size_t>{8, 7, 3, 5, 2, 0, 6, 1, 9, 4}));
  EXPECT_EQ(DataSampler(10, 1).epoch_order(1), (std::vector<size_t>{8, 4, 1, 2, 3, 7, 9, 0, 6, 5}));
}

TEST(DataSampler, BatchesWalkEpochsWithoutDropsOrRepeats) {
  DataSampler s(10, 3);
  std::vector<size_t> seen;
  for (int b = 0; b < 3; ++b) {
    auto batch = s.next_batch(4);
    ASSERT_EQ(batch.size(), 4u);
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  // 12 = all of epoch 0, then the first 2 of epoch 1 (the third batch straddles).
  std::vector<size_t> expect = s.epoch_order(0);
  auto e1 = s.epoch_order(1);
  expect.insert(expect.end(), e1.begin(), e1.begin() + 2);
  EXPECT_EQ(seen, expect);
  EXPECT_EQ(s.cursor().epoch, 1u);
  EXPECT_EQ(s.cursor().index, 2u);
  // A batch larger than the dataset spans several epochs.
  auto big = DataSampler(3, 3).next_batch(7);
  EXPECT_EQ(big.size(), 7u);
  EXPECT_EQ(sorted(std::vector<size_t>(big.begin(), big.begin() + 3)), iota(3));
}

TEST(DataSampler, RestoredCursorContinuesExactly) {
  DataSampler a(37, 11);
  for (int i = 0; i < 5; ++i) a.next_batch(8);  // ends mid-epoch 1
  std::string saved = a.cursor().to_json().dump();
  std::vector<std::vector<size_t>> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(a.next_batch(8));

  DataSampler b(37, /*seed from config, overridden by the checkpoint*/ 999);
  b.restore(DataCursor::from_json(nlohmann::json::parse(saved), "ckpt/data.json"), "ckpt/data.json");
  EXPECT_EQ(b.cursor().seed, 11u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(b.next_batch(8), expected[i]) << "batch " << i;
  EXPECT_EQ(b.cursor(), a.cursor());
}

TEST(DataCursor, JsonRoundTripAndDamageIsReported) {
  DataCursor c{3, 5, 42, 10};
  EXPECT_EQ(c.to_json().dump(), "{\"epoch\":3,\"index\":5,\"seed\":42,\"size\":10}");
  EXPECT_EQ(DataCursor::from_json(c.to_json(), "x"), c);
  auto error = [](const std::string& text) -> std::string {
    try {
      DataCursor::from_json(nlohmann::json::parse(text), "ckpt/step-000010/data.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("{\"epoch\":1,\"index\":2,\"size\":10}").find("ckpt/step-000010/data.json: data cursor field 'seed' "
                                                                 "is missing"),
            std::string::npos);
  EXPECT_NE(error("{\"epoch\":-1,\"index\":2,\"seed\":1,\"size\":10}").find("field 'epoch' is not a non-negative "
                                                                            "integer (-1)"),
            std::string::npos);
  EXPECT_NE(error("{\"epoch\":1,\"index\":10,\"seed\":1,\"size\":10}").find("index 10 is outside the dataset of "
                                                                            "size 10"),
            std::string::npos);
  EXPECT_NE(error("[1,2]").find("must be a JSON object"), std::string::npos);
}

TEST(DataSampler, RestoreIntoDifferentDataIsAnError) {
  DataSampler s(50, 1);
  try {
    s.restore(DataCursor{0, 3, 1, 40}, "runs/x/checkpoints/00-sft/step-000100");
    FAIL();
  } catch (const InputError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("saved for a dataset of 40 examples but this dataset has 50"), std::string::npos) << m;
  }
}

TEST(DataSampler, DpShardsAreDisjointAndCoverTheGlobalBatch) {
  const int world = 4;
  const size_t n = 12;
  DataSampler single(30, 5);
  std::vector<DataSampler> ranks(world, DataSampler(30, 5));
  for (int step = 0; step < 6; ++step) {  // 72 samples: crosses two epoch boundaries
    std::vector<size_t> global = single.next_batch(n);
    std::vector<size_t> joined;
    std::set<size_t> distinct;
    for (int r = 0; r < world; ++r) {
      auto part = ranks[r].next_batch(n, r, world);
      ASSERT_EQ(part.size(), n / world);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined, global) << "step " << step;
    // Disjoint within the batch unless the batch straddles an epoch boundary
    // (an example may then legitimately appear once per epoch).
    distinct.insert(global.begin(), global.end());
    if (single.cursor().index >= n) {
      EXPECT_EQ(distinct.size(), n) << "step " << step;
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(ranks[r].cursor(), single.cursor());
  }
}

TEST(DataSampler, BatchMustDivideOverDp) {
  DataSampler s(30, 5);
  try {
    s.next_batch(10, 0, 4);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("global batch 10 is not divisible by the data-parallel size 4"),
              std::string::npos);
  }
}
