// AdamW's multi-tensor and fused kernels against its per-tensor update, and the
// gradient norm's device path against the per-tensor sums (all on the CPU here;
// a GPU takes the same code with kernels that launch once per op).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/adamw_multi_tensor.h"
#include "hpcrl/optim/grad_clip.h"

using namespace hpcrl;

namespace {

const optim::AdamWOptions kOpts{1e-2, 0.9, 0.95, 1e-8, 0.1};

// Three parameters of different shapes (one of them bf16, held on an fp32 master).
optim::ParamSet parameters(at::ScalarType last_dtype) {
  torch::manual_seed(7);
  return {{"a", torch::randn({5, 3}).requires_grad_(true), optim::Sharding::kReplicated},
          {"b", torch::randn({7}).requires_grad_(true), optim::Sharding::kTensor},
          {"c", torch::randn({2, 4}).to(last_dtype).requires_grad_(true), optim::Sharding::kReplicated}};
}

optim::ParamSet copy_of(const optim::ParamSet& ps) {
  optim::ParamSet out;
  for (const auto& p : ps) out.push_back({p.name, p.tensor.detach().clone().requires_grad_(true), p.sharding});
  return out;
}

// Ten steps of `kernel` on `ps` with the gradients of step s: sin(s·(i+1) + element index).
void ten_steps(optim::ParamSet& ps, optim::AdamWKernel kernel) {
  optim::AdamW opt(ps, kOpts);
  opt.set_kernel(kernel);
  for (int s = 1; s <= 10; ++s) {
    for (size_t i = 0; i < ps.size(); ++i) {
      at::Tensor t = ps[i].tensor;
      at::Tensor g = (at::arange(t.numel(), at::kFloat) + double(s) * double(i + 1)).sin().view(t.sizes());
      t.mutable_grad() = g.to(t.scalar_type());
    }
    opt.step(kOpts.lr);
    opt.zero_grad();
  }
}

// Largest |x − y| / (|y| + 1e-12) over every parameter.
double max_relative_difference(const optim::ParamSet& x, const optim::ParamSet& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    at::Tensor a = x[i].tensor.detach().to(at::kDouble), b = y[i].tensor.detach().to(at::kDouble);
    worst = std::max(worst, ((a - b).abs() / (b.abs() + 1e-12)).max().item<double>());
  }
  return worst;
}

}  // namespace

TEST(AdamWMultiTensor, CpuWeightsTakeThePerTensorPass) {
  optim::ParamSet ps = parameters(at::kFloat);
  EXPECT_EQ(optim::AdamW(ps, kOpts).kernel(), optim::AdamWKernel::kPerTensor);
}

TEST(AdamWMultiTensor, EqualsThePerTensorUpdateAfterTenSteps) {
  optim::ParamSet per_tensor = parameters(at::kFloat), multi = copy_of(per_tensor);
  ten_steps(per_tensor, optim::AdamWKernel::kPerTensor);
  ten_steps(multi, optim::AdamWKernel::kMultiTensor);
  // The same nine elementwise ops per element as adamw_update_with_ops; the per-tensor
  // pass reorders nothing that rounds differently by more than float's last bits.
  EXPECT_LT(max_relative_difference(multi, per_tensor), 1e-6);
  // And the weights moved: ten steps of lr 0.01 change each by ~0.1.
  EXPECT_GT((multi[0].tensor - parameters(at::kFloat)[0].tensor).abs().max().item<double>(), 0.05);
}

TEST(AdamWMultiTensor, Bf16ParametersUpdateOnTheirMastersAlike) {
  optim::ParamSet per_tensor = parameters(at::kBFloat16), multi = copy_of(per_tensor);
  ten_steps(per_tensor, optim::AdamWKernel::kPerTensor);
  ten_steps(multi, optim::AdamWKernel::kMultiTensor);
  // The bf16 weight is its master rounded: equal masters give equal bf16 bits.
  EXPECT_TRUE(torch::equal(multi[2].tensor, per_tensor[2].tensor));
  EXPECT_LT(max_relative_difference(multi, per_tensor), 1e-6);
}

TEST(AdamWMultiTensor, FusedKernelEqualsThePerTensorUpdateAfterTenSteps) {
  if (!optim::has_fused_adamw()) GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no _fused_adamw_ (2.4+)";
  optim::ParamSet per_tensor = parameters(at::kFloat), fused = copy_of(per_tensor);
  ten_steps(per_tensor, optim::AdamWKernel::kPerTensor);
  ten_steps(fused, optim::AdamWKernel::kFused);
  EXPECT_LT(max_relative_difference(fused, per_tensor), 1e-6);
}

TEST(AdamWMultiTensor, FusedKernelIsRefusedWhereLibTorchHasNone) {
  if (optim::has_fused_adamw()) GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has _fused_adamw_";
  optim::ParamSet ps = parameters(at::kFloat);
  EXPECT_THROW(ten_steps(ps, optim::AdamWKernel::kFused), std::exception);
}

TEST(AdamWMultiTensor, ZeroGradClearsEveryGradientInOneCall) {
  optim::ParamSet ps = parameters(at::kFloat);
  optim::AdamW opt(ps, kOpts);
  for (auto& p : ps) p.tensor.mutable_grad() = at::ones_like(p.tensor);
  opt.zero_grad();
  for (const auto& p : ps) EXPECT_EQ(p.tensor.grad().abs().sum().item<double>(), 0.0) << p.name;
}

TEST(GradNormMultiTensor, EqualsThePerTensorSums) {
  optim::ParamSet ps = parameters(at::kFloat);
  ps[1].replicas = 2;  // its squared sum counts half
  // a: 15 ones, b: 7 twos over 2 replicas, c: 8 threes → 15 + 7·4/2 + 8·9 = 101.
  ps[0].tensor.mutable_grad() = at::ones({5, 3});
  ps[1].tensor.mutable_grad() = at::full({7}, 2.0);
  ps[2].tensor.mutable_grad() = at::full({2, 4}, 3.0);
  parallel::ParallelContext ctx;
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), std::sqrt(101.0), 1e-12);
  EXPECT_NEAR(optim::global_grad_norm_multi_tensor(ps, ctx), std::sqrt(101.0), 1e-6);
}

TEST(GradNormMultiTensor, ClippingScalesEveryGradientByOneFactor) {
  optim::ParamSet ps = parameters(at::kFloat);
  ps[0].tensor.mutable_grad() = at::full({5, 3}, 4.0);  // 15 · 16 = 240
  ps[1].tensor.mutable_grad() = at::zeros({7});
  ps[2].tensor.mutable_grad() = at::full({2, 4}, 1.0);  // 8: norm sqrt(248)
  parallel::ParallelContext ctx;
  const double norm = optim::clip_grad_norm(ps, 1.0, ctx);
  EXPECT_NEAR(norm, std::sqrt(248.0), 1e-9);
  // Scaled by 1 / (sqrt(248) + 1e-6): the norm afterwards is just under 1.
  EXPECT_NEAR(optim::global_grad_norm(ps, ctx), 1.0, 1e-6);
  EXPECT_NEAR(ps[0].tensor.grad()[0][0].item<double>(), 4.0 / (std::sqrt(248.0) + 1e-6), 1e-6);
}
