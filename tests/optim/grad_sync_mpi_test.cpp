// Bucketed overlapped dp gradient averaging equals the average of every rank's
// gradients computed on one rank; grad-norm clipping with tp shards counts
// replicated parameters once.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/optim/grad_sync.h"

using namespace hpcrl;

namespace {
struct TinyNet {
  at::Tensor w1, b1, w2;
  explicit TinyNet(int seed) {
    torch::manual_seed(seed);
    w1 = torch::randn({6, 16}).requires_grad_(true);
    b1 = torch::randn({16}).requires_grad_(true);
    w2 = torch::randn({16, 1}).requires_grad_(true);
  }
  at::Tensor loss(const at::Tensor& x) { return (x.matmul(w1) + b1).relu().matmul(w2).pow(2).mean(); }
  optim::ParamSet params() {
    return {{"w1", w1, optim::Sharding::kReplicated}, {"b1", b1, optim::Sharding::kReplicated},
            {"w2", w2, optim::Sharding::kReplicated}};
  }
};
at::Tensor batch_of(int rank, int micro) {
  torch::manual_seed(1000 + rank * 10 + micro);
  return torch::randn({4, 6});
}
}  // namespace

TEST(GradSync, EqualsAverageOfAllRanksWithMicroBatches) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int R = world->size(), r = world->rank();
  const int micro = 2;

  TinyNet net(7);
  auto ps = net.params();
  optim::GradSync sync(ps, world, /*bucket_bytes=*/256);  // several buckets
  EXPECT_GE(sync.num_buckets(), 2u);
  for (int m = 0; m < micro; ++m) {
    sync.prepare(m == micro - 1);
    net.loss(batch_of(r, m)).backward();
  }
  sync.finish();

  TinyNet ref(7);
  for (int rr = 0; rr < R; ++rr)
    for (int m = 0; m < micro; ++m) ref.loss(batch_of(rr, m)).backward();
  EXPECT_TRUE(torch::allclose(net.w1.grad(), ref.w1.grad() / R, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(net.b1.grad(), ref.b1.grad() / R, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(net.w2.grad(), ref.w2.grad() / R, 1e-5, 1e-6));
}

TEST(GradClip, TensorShardsSumAcrossTpReplicatedCountOnce) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int R = world->size(), r = world->rank();
  at::Tensor shard = torch::zeros({2}).requires_grad_(true);
  at::Tensor rep = torch::zeros({1}).requires_grad_(true);
  shard.mutable_grad() = torch::full({2}, float(r + 1));
  rep.mutable_grad() = torch::full({1}, 3.0f);
  optim::ParamSet ps{{"s", shard, optim::Sharding::kTensor}, {"r", rep, optim::Sharding::kReplicated}};
  parallel::ParallelContext ctx;
  ctx.tp = world;
  double expect_sq = 9.0;
  for (int k = 0; k < R; ++k) expect_sq += 2.0 * (k + 1) * (k + 1);
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), std::sqrt(expect_sq), 1e-6);
}
