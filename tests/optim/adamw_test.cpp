// AdamW equals torch's reference AdamW step for step; state round-trips.
#include <gtest/gtest.h>

#include <cmath>
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

// The fused CPU pass against the same update as tensor ops, over 100,003 elements (an odd
// count: the vectorised body and the scalar tail both run) and three steps with weight decay.
TEST(AdamW, FusedCpuPassEqualsTheTensorOps) {
  torch::manual_seed(2);
  const optim::AdamWOptions o{0.01, 0.9, 0.95, 1e-8, 0.1};
  at::Tensor w_fused = torch::randn({100003}), w_ops = w_fused.clone();
  at::Tensor m_fused = torch::zeros({100003}), m_ops = torch::zeros({100003});
  at::Tensor v_fused = torch::zeros({100003}), v_ops = torch::zeros({100003});
  for (int64_t step = 1; step <= 3; ++step) {
    at::Tensor g = torch::randn({100003});
    optim::adamw_update(w_fused, g, m_fused, v_fused, 0.01, step, o);
    optim::adamw_update_with_ops(w_ops, g, m_ops, v_ops, 0.01, step, o);
  }
  // ATen's vectorised add and addcmul fuse a multiply-add (one rounding where the pass has
  // two), so the two agree to a few units in the last place of the largest value, not bit for bit.
  auto ulps = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a - b).abs().max() / (b.abs().max() * std::ldexp(1.0, -23))).item<double>();
  };
  EXPECT_LE(ulps(m_fused, m_ops), 4.0);
  EXPECT_LE(ulps(v_fused, v_ops), 4.0);
  EXPECT_LE(ulps(w_fused, w_ops), 4.0);
  EXPECT_FALSE(torch::equal(w_fused, torch::zeros_like(w_fused)));
}

// ZeRO-1 updates each rank's slice of a flat vector and relies on getting the whole
// vector's bits: the update of element i may not depend on where i sits.
TEST(AdamW, UpdatingTwoSlicesGivesTheWholeUpdatesBits) {
  torch::manual_seed(3);
  const optim::AdamWOptions o{0.05, 0.9, 0.999, 1e-8, 0.01};
  at::Tensor w = torch::randn({1037}), g = torch::randn({1037});
  at::Tensor m = torch::randn({1037}) * 0.1, v = torch::rand({1037}) * 0.1;
  at::Tensor w2 = w.clone(), m2 = m.clone(), v2 = v.clone();
  optim::adamw_update(w, g, m, v, 0.05, 4, o);
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 517}, {517, 1037}}) {  // 517: not a multiple of a vector
    at::Tensor ws = w2.slice(0, lo, hi), ms = m2.slice(0, lo, hi), vs = v2.slice(0, lo, hi);
    optim::adamw_update(ws, g.slice(0, lo, hi), ms, vs, 0.05, 4, o);
  }
  EXPECT_TRUE(torch::equal(w, w2));
  EXPECT_TRUE(torch::equal(m, m2));
  EXPECT_TRUE(torch::equal(v, v2));
}

// A graph that saved the weights before the step must not run its backward on the new ones.
TEST(AdamW, AStepMakesGraphsThatSavedTheWeightsRefuseBackward) {
  at::Tensor a = torch::ones({4}).requires_grad_(true);
  optim::AdamW opt({{"w", a, optim::Sharding::kReplicated}}, {0.1, 0.9, 0.999, 1e-8, 0.0});
  (a * a).sum().backward();
  at::Tensor stale = (a * a).sum();  // saves `a` for its backward
  opt.step(0.1);
  EXPECT_THROW(stale.backward(), c10::Error);
}

namespace {
// State of a one-parameter AdamW whose moments are all `fill`, saved with `replica`.
std::map<std::string, at::Tensor> moments_of(float fill, const std::vector<int64_t>& replica) {
  std::map<std::string, at::Tensor> s{{"w.exp_avg", at::full({2}, fill)},
                                      {"w.exp_avg_sq", at::full({2}, fill)},
                                      {"step", at::full({}, int64_t(4), at::kLong)}};
  if (!replica.empty()) s["replica"] = at::tensor(replica, at::kLong);
  return s;
}
}  // namespace

// Resumed at another dp size: of every saved rank's state, the one of this
// rank's model shard (tp 1 of 2 here) is loaded.
TEST(AdamW, LoadReshardedTakesTheStateWithItsReplicaKey) {
  at::Tensor a = torch::zeros({2}).requires_grad_(true);
  optim::AdamW opt({{"w", a, optim::Sharding::kReplicated}}, {});
  opt.set_replica({1, 0, 0});
  opt.load_resharded({optim::SavedState::in_memory(moments_of(1.0f, {0, 0, 0}), "rank 0"),
                      optim::SavedState::in_memory(moments_of(2.0f, {1, 0, 0}), "rank 1")});
  EXPECT_TRUE(torch::equal(opt.state().at("w.exp_avg"), at::full({2}, 2.0f)));
  EXPECT_EQ(opt.steps(), 4);
}

TEST(AdamW, LoadReshardedRefusesStateWithoutReplicaKeys) {
  at::Tensor a = torch::zeros({2}).requires_grad_(true);
  optim::AdamW opt({{"w", a, optim::Sharding::kReplicated}}, {});
  opt.set_replica({0, 0, 0});
  try {
    opt.load_resharded({optim::SavedState::in_memory(moments_of(1.0f, {}), "old/optimizer-rank-00000.safetensors")});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("old/optimizer-rank-00000.safetensors: the optimizer state does not say "
                                         "which model shard it is"),
              std::string::npos) << e.what();
  }
}
