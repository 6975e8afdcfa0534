// AdamW equals torch's reference AdamW step for step; state round-trips.
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include "hpcrl/optim/adamw.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;

namespace {
at::Tensor loss_of(const at::Tensor& w, const at::Tensor& x) { return (x.matmul(w)).tanh().pow(2).sum(); }
}  // namespace

TEST(AdamW, MatchesTorchAdamWOverSteps) {
  torch::manual_seed(0);
  at::Tensor x = torch::randn({8, 5});
  at::Tensor w0 = torch::randn({5, 3});
  at::Tensor a = w0.clone().requires_grad_(true);
  at::Tensor b = w0.clone().requires_grad_(true);
  optim::AdamW mine({{"w", a, optim::Sharding::kReplicated}}, {0.01, 0.9, 0.95, 1e-8, 0.1});
  torch::optim::AdamW ref({b}, torch::optim::AdamWOptions(0.01).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 6; ++step) {
    mine.zero_grad();
    ref.zero_grad();
    loss_of(a, x).backward();
    loss_of(b, x).backward();
    mine.step(0.01);
    ref.step();
    ASSERT_TRUE(torch::allclose(a, b, 1e-6, 1e-7)) << "step " << step << " max diff " << (a - b).abs().max().item<float>();
  }
  EXPECT_EQ(mine.steps(), 6);
}

TEST(AdamW, StateRoundTripContinuesIdentically) {
  torch::manual_seed(1);
  at::Tensor x = torch::randn({4, 3});
  at::Tensor a = torch::randn({3, 2}).requires_grad_(true);
  optim::AdamW opt({{"w", a, optim::Sharding::kReplicated}}, {0.05, 0.9, 0.999, 1e-8, 0.0});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    loss_of(a, x).backward();
    opt.step(0.05);
  }
  at::Tensor b = a.detach().clone().requires_grad_(true);
  optim::AdamW restored({{"w", b, optim::Sharding::kReplicated}}, {0.05, 0.9, 0.999, 1e-8, 0.0});
  restored.load_state(opt.state());
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    restored.zero_grad();
    loss_of(a, x).backward();
    loss_of(b, x).backward();
    opt.step(0.05);
    restored.step(0.05);
  }
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(AdamW, LoadStateNamesMissingKey) {
  at::Tensor a = torch::zeros({2}).requires_grad_(true);
  optim::AdamW opt({{"layer.w", a, optim::Sharding::kReplicated}}, {});
  try {
    opt.load_state({});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no 'layer.w.exp_avg'"), std::string::npos) << e.what();
  }
}

TEST(AdamW, Bf16ParamsKeepFp32Master) {
  at::Tensor p = torch::ones({4}, torch::kBFloat16).requires_grad_(true);
  optim::AdamW opt({{"p", p, optim::Sharding::kReplicated}}, {1e-4, 0.9, 0.999, 1e-8, 0.0});
  // A tiny update that bf16 alone would round away accumulates in the master.
  for (int i = 0; i < 10; ++i) {
    p.mutable_grad() = torch::ones({4}, torch::kBFloat16);
    opt.step(1e-4);
  }
  auto master = opt.state().at("p.master");
  EXPECT_NEAR(master[0].item<float>(), 1.0f - 10 * 1e-4f, 1e-5);
}
