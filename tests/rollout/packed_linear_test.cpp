// The engine's CPU GEMM (packed_linear.h, src/rollout/cpu_kernels.h), for
// every instruction set this CPU runs: equal to x·Wᵀ + b within the rounding
// bound of a float32 sum, for row counts that cover whole tiles, the narrower
// last tile and several row blocks, depths that cover several depth blocks,
// and fused outputs that leave a partial last panel; and a row's result is
// bit-identical whatever rows are computed beside it.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "hpcrl/rollout/packed_linear.h"
#include "rollout/cpu_kernels.h"
#include "cpu_kernel_cases.h"

namespace {

using namespace hpcrl;
using rollout::PackedLinear;
using rollout::StepBuffer;
namespace cpu = rollout::cpu;
using rollout::test::kernels_of_this_cpu;
using rollout::test::randn;

// q/k/v-like parts [n_i, k] with biases, fused; rows x [m, k].
void expect_equals_linear(const cpu::Kernels* kernels, int64_t m, int64_t k, const std::vector<int64_t>& parts) {
  std::vector<at::Tensor> w, b;
  for (size_t i = 0; i < parts.size(); ++i) {
    w.push_back(randn({parts[i], k}, 10 + i));
    b.push_back(randn({parts[i]}, 20 + i));
  }
  const at::Tensor x = randn({m, k}, 1);
  StepBuffer buffer;
  const at::Tensor y = PackedLinear(w, b, kernels).forward(x, buffer);
  // float64 reference, and the rounding bound of a k-term float32 sum:
  // |error| <= k · 2^-24 · Σ|x_j w_j| (+ the bias add).
  const at::Tensor W = at::cat(w).to(at::kDouble), B = at::cat(b).to(at::kDouble), X = x.to(at::kDouble);
  const at::Tensor want = at::linear(X, W, B);
  const at::Tensor bound = (k + 1) * std::ldexp(1.0, -24) * (at::matmul(X.abs(), W.abs().t()) + B.abs());
  ASSERT_EQ(y.sizes(), want.sizes());
  EXPECT_TRUE(((y.to(at::kDouble) - want).abs() <= bound).all().item<bool>())
      << kernels->name << " m=" << m << " k=" << k << ": max error "
      << (y.to(at::kDouble) - want).abs().max().item<double>();
}

TEST(PackedLinear, EqualsLinearWithinFloat32RoundingForEveryKernel) {
  for (const cpu::Kernels* kernels : kernels_of_this_cpu())
    for (int64_t m : {1, 5, 7, 13, 70, 130})          // one row, partial tiles, > one 64-row block
      for (int64_t k : {3, 64, 1100})                 // below a vector, exact vectors, > one 1024 depth block
        expect_equals_linear(kernels, m, k, {37, 16, 16});  // fused q/k/v-like parts, partial last panel
}

TEST(PackedLinear, ARowsResultDoesNotDependOnTheRowsBesideIt) {
  for (const cpu::Kernels* kernels : kernels_of_this_cpu()) {
    const PackedLinear linear({randn({150, 1100}, 2)}, {randn({150}, 3)}, kernels);
    const at::Tensor x = randn({70, 1100}, 4);
    StepBuffer many, one;
    const at::Tensor all = linear.forward(x, many).clone();
    for (int64_t r : {0, 5, 6, 63, 64, 69}) {
      const at::Tensor alone = linear.forward(x.narrow(0, r, 1), one);
      EXPECT_TRUE(alone.equal(all.narrow(0, r, 1))) << kernels->name << " row " << r;
    }
  }
}

// packed[i][c] = rows[c][i], zeros for the null (padding) rows: k = 21 covers
// two whole 8-deep transposes and a 5-deep tail; the last group of 8 holds a null row.
TEST(PackedLinear, PackPanelTransposesItsRowsAndZeroesThePadding) {
  for (const cpu::Kernels* kernels : kernels_of_this_cpu()) {
    const int64_t P = kernels->panel, k = 21;
    const at::Tensor w = randn({P, k}, 15);
    std::vector<const float*> rows;
    for (int64_t c = 0; c < P; ++c) rows.push_back(w.data_ptr<float>() + c * k);
    rows.back() = nullptr;
    std::vector<float> panel(k * P, -1.0f);
    kernels->pack_panel(rows.data(), k, panel.data());
    for (int64_t i = 0; i < k; ++i)
      for (int64_t c = 0; c < P; ++c) {
        const float want = c == P - 1 ? 0.0f : w[c][i].item<float>();
        ASSERT_EQ(panel[i * P + c], want) << kernels->name << " depth " << i << " column " << c;
      }
  }
}

TEST(PackedLinear, OutputKeepsTheLeadingShapeAndReusesItsBuffer) {
  const PackedLinear linear({randn({24, 8}, 5)}, {});
  StepBuffer buffer;
  const at::Tensor y = linear.forward(randn({2, 3, 8}, 6), buffer);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 24}));
  const void* storage = y.data_ptr();
  EXPECT_EQ(linear.forward(randn({1, 2, 8}, 7), buffer).data_ptr(), storage);  // fewer rows: same memory
}

TEST(PackedLinear, PackingNewWeightsOfTheSameShapeReusesItsMemory) {
  PackedLinear linear({randn({37, 64}, 8), randn({16, 64}, 9)}, {randn({37}, 10), randn({16}, 11)});
  const void* storage = linear.storage();
  // An optimizer step later: new weights, and this time no biases.
  const std::vector<at::Tensor> next = {randn({37, 64}, 12), randn({16, 64}, 13)};
  linear.pack(next, {});
  EXPECT_EQ(linear.storage(), storage);
  const at::Tensor x = randn({5, 64}, 14);
  StepBuffer a, b;
  EXPECT_TRUE(linear.forward(x, a).equal(PackedLinear(next, {}).forward(x, b)));
}

}  // namespace
