// The train/inference mismatch over a data-parallel group (mpirun -np 2): each
// rank holds one row of the batch, and after the reduction every rank reports
// the figures one rank computes over both rows (sums added, the maximum the
// larger rank's).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/algo/objectives/logprob_mismatch.h"
#include "hpcrl/distributed/bootstrap.h"

namespace hpcrl::algo {
namespace {

// The two rows of logprob_mismatch_test.cpp's hand-computed batch: row 0 has r = 0.5, 0 on its
// response tokens (columns 1-2), row 1 r = -0.25, 0 (columns 2-3); masked columns differ by more.
const float kTrainer[2][4] = {{-5.f, -1.f, -2.f, -9.f}, {-3.f, -7.f, -0.5f, -1.5f}};
const float kEngine[2][4] = {{0.f, -1.5f, -2.f, 0.f}, {0.f, 0.f, -0.25f, -1.5f}};
const float kMask[2][4] = {{0.f, 1.f, 1.f, 0.f}, {0.f, 0.f, 1.f, 1.f}};

at::Tensor rows(const float (&v)[2][4], int64_t first, int64_t count) {
  return at::tensor(std::vector<float>(&v[0][0], &v[0][0] + 8)).view({2, 4}).slice(0, first, first + count);
}

TEST(LogprobMismatchMpi, EveryRankReportsTheFiguresOfTheWholeBatch) {
  const auto& w = dist::init(nullptr, nullptr);
  if (w.size != 2) GTEST_SKIP() << "needs 2 ranks";
  double one_max = 0, mine_max = 0;
  const MismatchSums both = mismatch_sums(rows(kTrainer, 0, 2), rows(kEngine, 0, 2), rows(kMask, 0, 2), one_max);
  const LogprobMismatch one = reduce_mismatch(both, one_max, nullptr);  // one rank, both rows
  const MismatchSums mine = mismatch_sums(rows(kTrainer, w.rank, 1), rows(kEngine, w.rank, 1),
                                          rows(kMask, w.rank, 1), mine_max);
  EXPECT_EQ(mine_max, w.rank == 0 ? 0.5 : 0.25);  // the ranks differ before the reduction
  const LogprobMismatch all = reduce_mismatch(mine, mine_max, dist::world_comm());
  // One rank over both rows: mean |r| = 0.75 / 4 = 0.1875, max 0.5, k3 mean 0.0443805134 (the unit test's arithmetic).
  EXPECT_DOUBLE_EQ(one.abs_mean, 0.1875);
  EXPECT_DOUBLE_EQ(all.abs_mean, one.abs_mean);
  EXPECT_EQ(all.abs_max, one.abs_max);
  EXPECT_DOUBLE_EQ(all.kl, one.kl);
  EXPECT_EQ(all.tokens, one.tokens);
}

}  // namespace
}  // namespace hpcrl::algo
