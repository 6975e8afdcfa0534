// The NCCL transport on the GPU: every collective of the Communicator with
// CUDA tensors gives what the MPI transport gives for the same tensors on the
// host, results stay on the device, and the calls are traced with bytes.
// Built only with a CUDA LibTorch and NCCL; run with as many ranks as the node
// has GPUs (NCCL refuses two ranks on one device), so one GPU means one rank:
// then it checks the device path end to end (communicator creation, stream
// ordering, dtype handling) rather than the arithmetic between ranks, which
// test_dist_comm covers over MPI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "distributed/comm_test_util.h"
#include "hpcrl/distributed/bootstrap.h"

namespace hpcrl::dist {
namespace {

using testing::same;
using testing::world_comm_for_test;

at::Device gpu() {
  static int index = [] {
    world_comm_for_test();
    return bind_device("cuda");
  }();
  return at::Device(at::kCUDA, static_cast<int8_t>(index));
}

// Rank-dependent values whose collective results differ per op.
at::Tensor values(int rank, at::ScalarType dtype, std::vector<int64_t> shape = {4, 6}) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return (at::arange(n, at::kDouble).reshape(shape) + 10 * rank).to(dtype);
}

const at::ScalarType kTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong};

TEST(NcclComm, AllReduceMatchesMpiForEveryOpAndDtype) {
  auto comm = world_comm_for_test();
  const at::Device d = gpu();
  for (auto dtype : kTypes)
    for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " op " + std::to_string(int(op)));
      at::Tensor host = values(comm->rank(), dtype), dev = host.to(d);
      comm->all_reduce(host, op);
      comm->all_reduce(dev, op);
      ASSERT_TRUE(dev.is_cuda());
      EXPECT_TRUE(same(dev.cpu(), host));
    }
}

TEST(NcclComm, GatherScatterBroadcastAllToAllMatchMpi) {
  auto comm = world_comm_for_test();
  const at::Device d = gpu();
  const int n = comm->size();
  at::Tensor x = values(comm->rank(), at::kFloat, {4 * n, 3});
  for (int64_t dim : {0, 1}) {
    at::Tensor g = comm->all_gather(x.to(d), dim);
    ASSERT_TRUE(g.is_cuda());
    EXPECT_TRUE(same(g.cpu(), comm->all_gather(x, dim)));
  }
  at::Tensor rs = comm->reduce_scatter(x.to(d), ReduceOp::kSum, 0);
  EXPECT_TRUE(same(rs.cpu(), comm->reduce_scatter(x, ReduceOp::kSum, 0)));
  at::Tensor b_host = x.clone(), b_dev = x.to(d);
  comm->broadcast(b_host, 0);
  comm->broadcast(b_dev, 0);
  EXPECT_TRUE(same(b_dev.cpu(), b_host));
  EXPECT_TRUE(same(comm->all_to_all(x.to(d)).cpu(), comm->all_to_all(x)));
  std::vector<int64_t> counts(n, 4);
  counts[0] = 4 * n - 4 * (n - 1);
  EXPECT_TRUE(same(comm->all_to_all(x.to(d), counts, counts).cpu(), comm->all_to_all(x, counts, counts)));
}

TEST(NcclComm, AsyncAllReduceOverlapsAndCompletes) {
  auto comm = world_comm_for_test();
  const at::Device d = gpu();
  at::Tensor host = values(comm->rank(), at::kFloat, {1 << 20});
  at::Tensor dev = host.to(d);
  WorkPtr w = comm->all_reduce_async(dev);
  at::Tensor busy = at::mm(at::ones({512, 512}, d), at::ones({512, 512}, d));  // work queued meanwhile
  w->wait();
  comm->all_reduce(host);
  EXPECT_TRUE(same(dev.cpu(), host));
  EXPECT_EQ(busy[0][0].item<float>(), 512.0f);
}

TEST(NcclComm, BfloatSumAccumulatesLikeTheHost) {
  auto comm = world_comm_for_test();
  const at::Device d = gpu();
  // Large values with small increments: a bf16 accumulator would round them away.
  at::Tensor host = (at::full({4096}, 256.0) + comm->rank()).to(at::kBFloat16), dev = host.to(d);
  comm->all_reduce(host);
  comm->all_reduce(dev);
  EXPECT_TRUE(same(dev.cpu(), host));
}

}  // namespace
}  // namespace hpcrl::dist
