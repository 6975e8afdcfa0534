// Every blocking collective of the Communicator on the world and on
// sub-groups, with rank-valued inputs whose results have a closed form, for
// the dtypes training uses (float32/64, bfloat16, float16, int32, int64).
// Runs under `mpirun -np 2` and `-np 4`.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "distributed/comm_test_util.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

using testing::same;
using testing::world_comm_for_test;

const at::ScalarType kAllTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong};

TEST(Bootstrap, WorldMatchesMpiAndOneNode) {
  const WorldInfo& w = init(nullptr, nullptr);
  auto comm = world_comm();
  EXPECT_EQ(comm->size(), w.size);
  EXPECT_EQ(comm->rank(), w.rank);
  EXPECT_EQ(comm->name(), "world");
  ASSERT_EQ(static_cast<int>(comm->world_ranks().size()), w.size);
  for (int r = 0; r < w.size; ++r) EXPECT_EQ(comm->world_ranks()[r], r);
  // CTest runs every rank on this machine: one node, local rank = world rank.
  EXPECT_EQ(w.num_nodes, 1);
  EXPECT_EQ(w.node, 0);
  EXPECT_EQ(w.local_size, w.size);
  EXPECT_EQ(w.local_rank, w.rank);
  EXPECT_EQ(bind_device(config::Device::cpu), -1);
}

TEST(AllReduce, SumAvgMaxMinEveryDtype) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  for (auto dtype : kAllTypes) {
    SCOPED_TRACE(c10::toString(dtype));
    auto make = [&] { return at::full({3, 5}, r + 1, at::TensorOptions().dtype(dtype)); };
    at::Tensor sum = make(), avg = make(), mx = make(), mn = make();
    comm->all_reduce(sum, ReduceOp::kSum);
    comm->all_reduce(avg, ReduceOp::kAvg);
    comm->all_reduce(mx, ReduceOp::kMax);
    comm->all_reduce(mn, ReduceOp::kMin);
    auto opts = at::TensorOptions().dtype(dtype);
    EXPECT_TRUE(same(sum, at::full({3, 5}, n * (n + 1) / 2, opts)));
    // avg of 1..n = (n+1)/2; integers truncate (n=2: 1, n=4: 2).
    bool integral = !at::isFloatingType(dtype);
    double want_avg = integral ? (n + 1) / 2 : (n + 1) / 2.0;
    EXPECT_TRUE(same(avg, at::full({3, 5}, want_avg, opts)));
    EXPECT_TRUE(same(mx, at::full({3, 5}, n, opts)));
    EXPECT_TRUE(same(mn, at::full({3, 5}, 1, opts)));
  }
}

TEST(AllReduce, Bfloat16AccumulatesInFloat32) {
  // 256 + 1 + 1 + ... : in bfloat16 (8 significant bits) 256 + 1 rounds back to
  // 256 at every step, so a pairwise bf16 sum stays 256; the float32 sum
  // 256 + (n-1) rounded once is what a correct reduction returns (n=4: 260).
  auto comm = world_comm_for_test();
  const int n = comm->size();
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    float mine = comm->rank() == 0 ? 256.f : 1.f;
    at::Tensor t = at::full({7}, mine, at::TensorOptions().dtype(dtype));
    comm->all_reduce(t, ReduceOp::kSum);
    at::Tensor want = at::full({7}, 256.f + (n - 1), at::kFloat).to(dtype);
    EXPECT_TRUE(same(t, want));
  }
}

TEST(AllReduce, NonContiguousInPlace) {
  auto comm = world_comm_for_test();
  const int n = comm->size();
  at::Tensor base = at::arange(12, at::kFloat).view({3, 4}) * (comm->rank() + 1);
  at::Tensor view = base.t();  // [4, 3], not contiguous
  ASSERT_FALSE(view.is_contiguous());
  comm->all_reduce(view, ReduceOp::kSum);
  EXPECT_TRUE(same(base, at::arange(12, at::kFloat).view({3, 4}) * (n * (n + 1) / 2)));
}

// What rank `r` contributes: [2, 3] with distinct values per rank.
at::Tensor contribution(int r, at::ScalarType dtype) {
  return (at::arange(6, at::kLong).view({2, 3}) + 10 * r).to(dtype);
}

TEST(AllGather, AlongDim0AndDim1EveryDtype) {
  auto comm = world_comm_for_test();
  const int n = comm->size();
  for (auto dtype : kAllTypes) {
    SCOPED_TRACE(c10::toString(dtype));
    std::vector<at::Tensor> all;
    for (int r = 0; r < n; ++r) all.push_back(contribution(r, dtype));
    at::Tensor mine = contribution(comm->rank(), dtype);
    EXPECT_TRUE(same(comm->all_gather(mine, 0), at::cat(all, 0)));    // [2n, 3]
    EXPECT_TRUE(same(comm->all_gather(mine, 1), at::cat(all, 1)));    // [2, 3n]
    EXPECT_TRUE(same(comm->all_gather(mine, -1), at::cat(all, 1)));
  }
}

TEST(ReduceScatter, AlongDim0AndDim1) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  for (auto dtype : kAllTypes) {
    SCOPED_TRACE(c10::toString(dtype));
    // Each rank: base + r, base = arange. Sum over ranks: n·base + n(n-1)/2.
    at::Tensor base = at::arange(2 * n * 3, at::kLong).view({2 * n, 3});
    at::Tensor total = (base * n + n * (n - 1) / 2).to(dtype);
    at::Tensor mine = (base + r).to(dtype);
    EXPECT_TRUE(same(comm->reduce_scatter(mine, ReduceOp::kSum, 0), total.chunk(n, 0)[r]));
    at::Tensor mine_t = mine.t().contiguous();  // [3, 2n]
    EXPECT_TRUE(same(comm->reduce_scatter(mine_t, ReduceOp::kSum, 1), total.t().chunk(n, 1)[r].contiguous()));
    EXPECT_TRUE(same(comm->reduce_scatter(mine, ReduceOp::kMax, 0), (base + (n - 1)).to(dtype).chunk(n, 0)[r]));
  }
}

// A part of more than 8 MiB per rank is reduced in slices on MPI (so no rank
// holds a temporary of the whole input); the result is the one-call result.
TEST(ReduceScatter, PartsLargerThanASliceAreExact) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  const int64_t part = (8 << 20) / 4 * 2 + 3;  // two float slices and 3 elements over
  for (auto dtype : {at::kFloat, at::kLong}) {
    SCOPED_TRACE(c10::toString(dtype));
    // Each rank: (i mod 1000) + r at element i (small, so float sums are exact); rank r's part of
    // the sum is n·(i mod 1000) + n(n-1)/2 for i in [r·part, (r+1)·part).
    at::Tensor mine = (at::arange(n * part, at::kLong).remainder(1000) + comm->rank()).to(dtype);
    at::Tensor want = ((at::arange(part, at::kLong) + r * part).remainder(1000) * n + n * (n - 1) / 2).to(dtype);
    EXPECT_TRUE(same(comm->reduce_scatter(mine, ReduceOp::kSum, 0), want));
  }
}

TEST(ReduceScatter, RejectsIndivisibleDim) {
  auto comm = world_comm_for_test();
  at::Tensor t = at::zeros({comm->size() + 1, 2});
  try {
    comm->reduce_scatter(t, ReduceOp::kSum, 0);
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible by the group size " + std::to_string(comm->size())),
              std::string::npos)
        << e.what();
  }
}

TEST(IntoBuffers, GatherAndScatterIntoPreallocatedFlatBuffers) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(c10::toString(dtype));
    // A sharded flat parameter: rank r owns elements [4r, 4r+4) of a 4n buffer.
    at::Tensor flat = at::full({4 * n}, -1, at::TensorOptions().dtype(dtype));
    at::Tensor shard = (at::arange(4, at::kLong) + 4 * r).to(dtype);
    comm->all_gather_into(flat, shard);
    EXPECT_TRUE(same(flat, at::arange(4 * n, at::kLong).to(dtype)));
    // Gradients: every rank holds grad = arange + r; its shard of the sum is n·arange + n(n-1)/2.
    at::Tensor grad = (at::arange(4 * n, at::kLong) + r).to(dtype);
    at::Tensor mine = at::empty({4}, at::TensorOptions().dtype(dtype));
    comm->reduce_scatter_into(mine, grad, ReduceOp::kSum);
    EXPECT_TRUE(same(mine, ((at::arange(4, at::kLong) + 4 * r) * n + n * (n - 1) / 2).to(dtype)));
  }
  at::Tensor wrong = at::empty({3});
  try {
    comm->all_gather_into(wrong, at::ones({2}));
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("out must be a contiguous Float tensor of " + std::to_string(2 * n) +
                                         " elements on cpu (got Float [3] on cpu)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Broadcast, FromEveryRootEveryDtype) {
  auto comm = world_comm_for_test();
  for (auto dtype : kAllTypes) {
    for (int root = 0; root < comm->size(); ++root) {
      at::Tensor t = contribution(comm->rank(), dtype);
      comm->broadcast(t, root);
      EXPECT_TRUE(same(t, contribution(root, dtype))) << c10::toString(dtype) << " root " << root;
    }
  }
}

TEST(AllToAll, EqualSplits) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(c10::toString(dtype));
    // Row block i (2 rows of 3) goes to rank i and holds 100·r + i.
    std::vector<at::Tensor> out_blocks, want_blocks;
    for (int i = 0; i < n; ++i) out_blocks.push_back(at::full({2, 3}, 100 * r + i, at::kLong));
    for (int j = 0; j < n; ++j) want_blocks.push_back(at::full({2, 3}, 100 * j + r, at::kLong));
    at::Tensor got = comm->all_to_all(at::cat(out_blocks).to(dtype));
    EXPECT_TRUE(same(got, at::cat(want_blocks).to(dtype)));
  }
}

TEST(AllToAll, VariableSplits) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  // Rank r sends (r + i) % 3 rows to rank i (some zero), each row [4] = 1000·r + 10·i + column.
  auto rows = [](int from, int to) { return static_cast<int64_t>((from + to) % 3); };
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    SCOPED_TRACE(c10::toString(dtype));
    std::vector<int64_t> send_counts(n), recv_counts(n);
    std::vector<at::Tensor> send_blocks, want_blocks;
    auto block = [](int from, int to, int64_t k) {
      return (at::arange(4, at::kLong) + 1000 * from + 10 * to).expand({k, 4}).contiguous();
    };
    for (int i = 0; i < n; ++i) {
      send_counts[i] = rows(r, i);
      recv_counts[i] = rows(i, r);
      send_blocks.push_back(block(r, i, send_counts[i]));
      want_blocks.push_back(block(i, r, recv_counts[i]));
    }
    at::Tensor got = comm->all_to_all(at::cat(send_blocks).to(dtype), send_counts, recv_counts);
    EXPECT_TRUE(same(got, at::cat(want_blocks).to(dtype)));
  }
}

TEST(AllToAll, RejectsCountsThatDoNotCoverTheTensor) {
  auto comm = world_comm_for_test();
  std::vector<int64_t> counts(comm->size(), 1);
  at::Tensor t = at::zeros({comm->size() + 2, 2});
  try {
    comm->all_to_all(t, counts, counts);
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("send counts sum to " + std::to_string(comm->size()) + " rows but the tensor has " +
                                         std::to_string(comm->size() + 2)),
              std::string::npos)
        << e.what();
  }
}

TEST(SendRecv, RingBothOrders) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    // 1 MB messages: above every eager limit, so a wrong ordering would deadlock.
    at::Tensor out = at::full({256 * 1024}, r, at::TensorOptions().dtype(dtype));
    at::Tensor in = at::empty({256 * 1024}, at::TensorOptions().dtype(dtype));
    if (r % 2 == 0) {
      comm->send(out, next, 7);
      comm->recv(in, prev, 7);
    } else {
      comm->recv(in, prev, 7);
      comm->send(out, next, 7);
    }
    EXPECT_TRUE(same(in, at::full({256 * 1024}, prev, at::TensorOptions().dtype(dtype))));
  }
}

TEST(SendRecv, ShapeMismatchIsAnErrorNamingBothCounts) {
  auto comm = world_comm_for_test();
  if (comm->rank() == 0) {
    comm->send(at::zeros({4}), 1, 3);
  } else if (comm->rank() == 1) {
    at::Tensor t = at::empty({6});
    try {
      comm->recv(t, 0, 3);
      FAIL() << "expected an error";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("received 4 elements, expected 6"), std::string::npos) << e.what();
    }
  }
  comm->barrier();
}

TEST(Barrier, WaitsForTheSlowestRank) {
  auto comm = world_comm_for_test();
  comm->barrier();
  auto t0 = std::chrono::steady_clock::now();
  if (comm->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comm->barrier();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 250.0);  // every rank, not just rank 0, waited for rank 0's sleep
}

TEST(Groups, EvenAndOddRanksReduceSeparately) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  std::vector<std::vector<int>> parity(2);
  for (int i = 0; i < n; ++i) parity[i % 2].push_back(i);
  CommPtr group = new_groups(parity, "parity");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->name(), "parity[" + std::to_string(r % 2) + "]");
  EXPECT_EQ(group->world_ranks(), parity[r % 2]);
  EXPECT_EQ(group->rank(), r / 2);
  at::Tensor t = at::full({4}, r, at::kLong);
  group->all_reduce(t, ReduceOp::kSum);
  int64_t want = 0;
  for (int i : parity[r % 2]) want += i;
  EXPECT_TRUE(same(t, at::full({4}, want, at::kLong)));
  // Gather along dim 0 returns members in group-rank order.
  at::Tensor g = group->all_gather(at::full({1}, r, at::kLong), 0);
  EXPECT_TRUE(same(g, at::tensor(std::vector<int64_t>(parity[r % 2].begin(), parity[r % 2].end()))));
}

TEST(Groups, NonMembersGetNullAndMembersAreOrderedAsListed) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  // Members listed in reverse: group rank k is world rank n-1-k; rank 0 is left out when n > 2.
  std::vector<int> members;
  for (int i = n - 1; i >= (n > 2 ? 1 : 0); --i) members.push_back(i);
  CommPtr group = new_group(members, "reversed");
  bool member = std::find(members.begin(), members.end(), r) != members.end();
  ASSERT_EQ(group != nullptr, member);
  if (!group) return;
  EXPECT_EQ(group->name(), "reversed");
  EXPECT_EQ(group->rank(), n - 1 - r);
  at::Tensor t = at::full({1}, r, at::kInt);
  group->broadcast(t, 0);  // group rank 0 = world rank n-1
  EXPECT_EQ(t.item<int>(), n - 1);
}

TEST(Groups, InconsistentListsAreDetected) {
  auto comm = world_comm_for_test();
  std::vector<int> members{0};
  if (comm->rank() == 1) members.push_back(1);  // rank 1 disagrees
  try {
    new_group(members, "bad");
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("different rank lists on different ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpcrl::dist
