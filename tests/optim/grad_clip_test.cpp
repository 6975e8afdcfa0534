// Single-rank gradient norm and clipping against direct computation.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/optim/grad_clip.h"

using namespace hpcrl;

TEST(GradClip, NormAndScaleMatchDirectComputation) {
  at::Tensor a = torch::zeros({3}).requires_grad_(true);
  at::Tensor b = torch::zeros({2, 2}).requires_grad_(true);
  a.mutable_grad() = torch::tensor({3.0f, 0.0f, 0.0f});
  b.mutable_grad() = torch::full({2, 2}, 2.0f);
  optim::ParamSet ps{{"a", a, optim::Sharding::kReplicated}, {"b", b, optim::Sharding::kTensor}};
  parallel::ParallelContext ctx;
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), 5.0, 1e-9);  // sqrt(9 + 4*4)
  double before = optim::clip_grad_norm(ps, 1.0, ctx);
  EXPECT_NEAR(before, 5.0, 1e-9);
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), 1.0, 1e-5);
  EXPECT_NEAR(optim::clip_grad_norm(ps, 10.0, ctx), 1.0, 1e-5);  // below the limit: unchanged
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), 1.0, 1e-5);
}
