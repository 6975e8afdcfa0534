// The NCCL transport on the GPU: every collective of NcclBackend on CUDA
// buffers gives what MpiBackend gives for the same buffers on the host, and
// results stay on the device. The backends are driven directly, below the
// Communicator, because Communicator answers a group of one rank itself and
// one GPU means one rank here (NCCL refuses two ranks on one device): the
// transport is what this test checks (communicator creation, stream ordering,
// dtype handling); the arithmetic between ranks is test_dist_comm's, over MPI.
// Built only with a CUDA LibTorch and NCCL; run with as many ranks as the node
// has GPUs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "distributed/comm_test_util.h"
#include "distributed/mpi/mpi_backend.h"
#include "distributed/nccl/nccl_backend.h"
#include "hpcrl/distributed/bootstrap.h"

namespace hpcrl::dist {
namespace {

using testing::same;
using testing::world_comm_for_test;

at::Device gpu() {
  static int index = [] {
    world_comm_for_test();
    return bind_device(config::Device::cuda);
  }();
  return at::Device(at::kCUDA, static_cast<int8_t>(index));
}

// Both transports over one duplicate of the world (the NCCL id travels over its MPI side).
struct Transports {
  std::unique_ptr<MpiBackend> mpi;
  std::unique_ptr<NcclBackend> nccl;
};

Transports& transports() {
  static Transports t = [] {
    const at::Device d = gpu();
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    Transports made;
    made.mpi = std::make_unique<MpiBackend>(comm, "test/mpi");
    made.nccl = std::make_unique<NcclBackend>(made.mpi->comm(), d.index(), "test/nccl");
    return made;
  }();
  return t;
}

int rank() { return transports().mpi->rank(); }
int size() { return transports().mpi->size(); }

// Rank-dependent values whose collective results differ per op.
at::Tensor values(int r, at::ScalarType dtype, int64_t n = 24) {
  return (at::arange(n, at::kDouble) + 10 * r).to(dtype);
}

const at::ScalarType kTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong};

TEST(NcclTransport, AllReduceMatchesMpiForEveryOpAndDtype) {
  Transports& t = transports();
  for (auto dtype : kTypes)
    for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " op " + std::to_string(int(op)));
      at::Tensor host = values(rank(), dtype), dev = host.to(gpu());
      t.mpi->all_reduce(host, op);
      t.nccl->all_reduce(dev, op);
      ASSERT_TRUE(dev.is_cuda());
      EXPECT_TRUE(same(dev.cpu(), host));
    }
}

TEST(NcclTransport, AllGatherMatchesMpi) {
  Transports& t = transports();
  at::Tensor host = values(rank(), at::kFloat), dev = host.to(gpu());
  at::Tensor host_out = at::empty({size() * host.numel()}, host.options());
  at::Tensor dev_out = at::empty({size() * host.numel()}, dev.options());
  t.mpi->all_gather(host, host_out);
  t.nccl->all_gather(dev, dev_out);
  EXPECT_TRUE(same(dev_out.cpu(), host_out));
}

TEST(NcclTransport, ReduceScatterMatchesMpi) {
  Transports& t = transports();
  at::Tensor host = values(rank(), at::kFloat, 4 * size()), dev = host.to(gpu());
  at::Tensor host_out = at::empty({4}, host.options()), dev_out = at::empty({4}, dev.options());
  t.mpi->reduce_scatter(host, host_out, ReduceOp::kSum);
  t.nccl->reduce_scatter(dev, dev_out, ReduceOp::kSum);
  EXPECT_TRUE(same(dev_out.cpu(), host_out));
}

TEST(NcclTransport, BroadcastMatchesMpi) {
  Transports& t = transports();
  at::Tensor host = values(rank(), at::kFloat), dev = host.to(gpu());
  t.mpi->broadcast(host, 0);
  t.nccl->broadcast(dev, 0);
  EXPECT_TRUE(same(dev.cpu(), host));
}

TEST(NcclTransport, AllToAllMatchesMpi) {
  Transports& t = transports();
  at::Tensor host = values(rank(), at::kFloat, 4 * size()), dev = host.to(gpu());
  const std::vector<int64_t> elems(size(), 4);
  at::Tensor host_out = at::empty_like(host), dev_out = at::empty_like(dev);
  t.mpi->all_to_all(host, host_out, elems, elems);
  t.nccl->all_to_all(dev, dev_out, elems, elems);
  EXPECT_TRUE(same(dev_out.cpu(), host_out));
}

TEST(NcclTransport, AsyncAllReduceOverlapsAndCompletes) {
  Transports& t = transports();
  const at::Device d = gpu();
  at::Tensor host = values(rank(), at::kFloat, 1 << 20), dev = host.to(d);
  WorkPtr w = t.nccl->run_async([&t, dev]() mutable { t.nccl->all_reduce(dev, ReduceOp::kSum); }, {dev});
  at::Tensor busy = at::mm(at::ones({512, 512}, d), at::ones({512, 512}, d));  // work queued meanwhile
  w->wait();
  t.mpi->all_reduce(host, ReduceOp::kSum);
  EXPECT_TRUE(same(dev.cpu(), host));
  EXPECT_EQ(busy[0][0].item<float>(), 512.0f);
}

TEST(NcclTransport, BfloatSumAccumulatesLikeTheHost) {
  Transports& t = transports();
  // Large values with small increments: a bf16 accumulator would round them away.
  at::Tensor host = (at::full({4096}, 256.0) + rank()).to(at::kBFloat16), dev = host.to(gpu());
  t.mpi->all_reduce(host, ReduceOp::kSum);
  t.nccl->all_reduce(dev, ReduceOp::kSum);
  EXPECT_TRUE(same(dev.cpu(), host));
}

}  // namespace
}  // namespace hpcrl::dist
