// Collectives over a group of one rank: Communicator answers them itself, with
// what the full collective gives over one rank, and never reaches the
// transport; a null CommPtr gets the same answers through the free functions.
// One process, no MPI: the communicator under test records every transport call.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/comm_test_util.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

using testing::same;

class DoneWork : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

// A group of `size` ranks whose transport only records which call reached it.
class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(int size) : size_(size), ranks_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  void send(const at::Tensor&, int, int) override { calls.push_back("send"); }
  void recv(at::Tensor&, int, int) override { calls.push_back("recv"); }
  WorkPtr send_async(at::Tensor, int, int) override { return record("send_async"); }
  WorkPtr recv_async(at::Tensor, int, int) override { return record("recv_async"); }

  std::vector<std::string> calls;

 protected:
  void do_all_reduce(at::Tensor&, ReduceOp) override { calls.push_back("all_reduce"); }
  at::Tensor do_all_gather(const at::Tensor& t, int64_t) override {
    calls.push_back("all_gather");
    return t;
  }
  at::Tensor do_reduce_scatter(const at::Tensor& t, ReduceOp, int64_t) override {
    calls.push_back("reduce_scatter");
    return t;
  }
  void do_all_gather_into(at::Tensor&, const at::Tensor&) override { calls.push_back("all_gather_into"); }
  void do_reduce_scatter_into(at::Tensor&, const at::Tensor&, ReduceOp) override {
    calls.push_back("reduce_scatter_into");
  }
  void do_broadcast(at::Tensor&, int) override { calls.push_back("broadcast"); }
  at::Tensor do_all_to_all(const at::Tensor& t, const std::vector<int64_t>&, const std::vector<int64_t>&) override {
    calls.push_back("all_to_all");
    return t;
  }
  void do_barrier() override { calls.push_back("barrier"); }
  WorkPtr do_all_reduce_async(at::Tensor, ReduceOp) override { return record("all_reduce_async"); }
  WorkPtr do_reduce_scatter_async(at::Tensor, at::Tensor, ReduceOp) override { return record("reduce_scatter_async"); }
  WorkPtr do_all_gather_async(at::Tensor, at::Tensor) override { return record("all_gather_async"); }
  WorkPtr do_broadcast_async(at::Tensor, int) override { return record("broadcast_async"); }

 private:
  WorkPtr record(const char* op) {
    calls.push_back(op);
    return std::make_shared<DoneWork>();
  }
  int size_;
  std::string name_ = "test/one";
  std::vector<int> ranks_;
};

at::Tensor values() { return at::tensor({1.5, -2.0, 4.0, 0.25, 8.0, -1.0}, at::kFloat).reshape({2, 3}); }

TEST(SizeOneGroup, AllReduceLeavesTheTensorForEveryOp) {
  RecordingCommunicator one(1);
  for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    at::Tensor t = values();
    one.all_reduce(t, op);  // sum, mean (÷1), max and min of one tensor: the tensor
    EXPECT_TRUE(same(t, values()));
  }
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllGatherReturnsTheInputInTheGatheredShape) {
  RecordingCommunicator one(1);
  at::Tensor g = one.all_gather(values(), 1);  // [2, 3·1]
  EXPECT_TRUE(same(g, values()));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllGatherOfANonContiguousInputIsContiguous) {
  RecordingCommunicator one(1);
  at::Tensor t = values().t();  // [3, 2], strides (1, 3)
  at::Tensor g = one.all_gather(t, 0);
  EXPECT_TRUE(g.is_contiguous());
  EXPECT_TRUE(same(g, values().t().contiguous()));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllGatherStillRefusesADimOutsideTheShape) {
  RecordingCommunicator one(1);
  EXPECT_THROW(one.all_gather(values(), 2), RuntimeError);  // a [2, 3] tensor has dims 0 and 1
}

TEST(SizeOneGroup, ReduceScatterReturnsTheWholeReduction) {
  RecordingCommunicator one(1);
  at::Tensor r = one.reduce_scatter(values(), ReduceOp::kAvg, -1);  // this rank's 3/1 = 3 columns
  EXPECT_TRUE(same(r, values()));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllGatherIntoCopiesTheInputIntoOut) {
  RecordingCommunicator one(1);
  at::Tensor out = at::zeros({6}, at::kFloat);  // 1 · 6 elements
  one.all_gather_into(out, values());
  EXPECT_TRUE(same(out, values().reshape({6})));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, ReduceScatterIntoCopiesTheInputIntoOut) {
  RecordingCommunicator one(1);
  at::Tensor out = at::zeros({6}, at::kFloat);  // 6 / 1 elements
  one.reduce_scatter_into(out, values(), ReduceOp::kSum);
  EXPECT_TRUE(same(out, values().reshape({6})));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, IntoStillRefusesAnOutOfTheWrongSize) {
  RecordingCommunicator one(1);
  at::Tensor out = at::zeros({5}, at::kFloat);  // needs 6
  EXPECT_THROW(one.all_gather_into(out, values()), RuntimeError);
}

TEST(SizeOneGroup, BroadcastLeavesTheTensor) {
  RecordingCommunicator one(1);
  at::Tensor t = values();
  one.broadcast(t, 0);
  EXPECT_TRUE(same(t, values()));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, BroadcastStillRefusesARootOutsideTheGroup) {
  RecordingCommunicator one(1);
  at::Tensor t = values();
  EXPECT_THROW(one.broadcast(t, 1), RuntimeError);  // the only rank is 0
}

TEST(SizeOneGroup, AllToAllReturnsTheInput) {
  RecordingCommunicator one(1);
  EXPECT_TRUE(same(one.all_to_all(values()), values()));  // chunk 0 of 1 goes to, and comes from, rank 0
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllToAllWithCountsReturnsTheInput) {
  RecordingCommunicator one(1);
  EXPECT_TRUE(same(one.all_to_all(values(), {2}, {2}), values()));  // 2 rows to itself, 2 from itself
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AllToAllWithCountsRefusesReceivingOtherThanItSends) {
  RecordingCommunicator one(1);
  EXPECT_THROW(one.all_to_all(values(), {2}, {3}), RuntimeError);
}

TEST(SizeOneGroup, BarrierReturnsAtOnce) {
  RecordingCommunicator one(1);
  one.barrier();
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AsyncAllReduceAndBroadcastAreCompletedOnReturn) {
  RecordingCommunicator one(1);
  at::Tensor a = values(), b = values();
  WorkPtr w1 = one.all_reduce_async(a, ReduceOp::kSum), w2 = one.broadcast_async(b, 0);
  EXPECT_TRUE(w1->is_completed());
  EXPECT_TRUE(w2->is_completed());
  EXPECT_TRUE(same(a, values()));
  EXPECT_TRUE(same(b, values()));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, AsyncGatherAndScatterIntoHaveCopiedOnReturn) {
  RecordingCommunicator one(1);
  at::Tensor gathered = at::zeros({6}, at::kFloat), scattered = at::zeros({6}, at::kFloat);
  WorkPtr g = one.all_gather_async(gathered, values());
  WorkPtr s = one.reduce_scatter_async(scattered, values(), ReduceOp::kAvg);
  EXPECT_TRUE(g->is_completed());
  EXPECT_TRUE(s->is_completed());
  EXPECT_TRUE(same(gathered, values().reshape({6})));
  EXPECT_TRUE(same(scattered, values().reshape({6})));
  EXPECT_TRUE(one.calls.empty());
}

TEST(SizeOneGroup, TwoRanksReachTheTransport) {
  RecordingCommunicator two(2);
  at::Tensor t = values();
  two.all_reduce(t);
  two.broadcast(t, 1);
  two.barrier();
  EXPECT_EQ(two.calls, (std::vector<std::string>{"all_reduce", "broadcast", "barrier"}));
}

TEST(NullCommunicator, AllReduceLeavesTheTensor) {
  at::Tensor t = values();
  all_reduce(nullptr, t, ReduceOp::kMax);
  EXPECT_TRUE(same(t, values()));
}

TEST(NullCommunicator, AllGatherReturnsTheInputInTheGatheredShape) {
  EXPECT_TRUE(same(all_gather(nullptr, values(), 1), values()));  // [2, 3·1]
}

TEST(NullCommunicator, ReduceScatterReturnsTheWholeReduction) {
  EXPECT_TRUE(same(reduce_scatter(nullptr, values(), ReduceOp::kSum, 0), values()));  // 2/1 rows
}

TEST(NullCommunicator, BroadcastLeavesTheTensor) {
  at::Tensor t = values();
  broadcast(nullptr, t, 0);
  EXPECT_TRUE(same(t, values()));
}

TEST(NullCommunicator, BroadcastRefusesARootOtherThanZero) {
  at::Tensor t = values();
  EXPECT_THROW(broadcast(nullptr, t, 1), RuntimeError);
}

TEST(NullCommunicator, FreeFunctionsUseAGivenCommunicator) {
  auto two = std::make_shared<RecordingCommunicator>(2);
  at::Tensor t = values();
  all_reduce(two, t);
  all_gather(two, t, 0);
  EXPECT_EQ(two->calls, (std::vector<std::string>{"all_reduce", "all_gather"}));
}

}  // namespace
}  // namespace hpcrl::dist
