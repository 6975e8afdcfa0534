// The engine's one-row GEMV (row_gemv.h, cpu::Kernels::gemv), for every
// instruction set this CPU runs: equal to x·Wᵀ + b within the rounding bound
// of a float32 sum, for depths below a vector, of whole vectors and with a
// tail, and weights whose rows are not a multiple of the 8-row block; and an
// output does not depend on the range of rows computed with it or the threads.
// bf16 weights: the same bound on their widened values, and a bf16 row equal
// to LibTorch's bf16 linear up to one rounding of the float32 sum.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "hpcrl/rollout/row_gemv.h"
#include "rollout/cpu_kernels.h"
#include "cpu_kernel_cases.h"

namespace {

using namespace hpcrl;
namespace cpu = rollout::cpu;
using rollout::test::kernels_of_this_cpu;
using rollout::test::randn;

TEST(RowGemv, EqualsLinearWithinFloat32RoundingForEveryKernel) {
  for (const cpu::Kernels* kernels : kernels_of_this_cpu())
    for (int64_t k : {3, 64, 1100}) {  // below a vector, whole vectors, whole vectors and a tail
      // q/k/v-like weights of 37, 16 and 13 rows (neither a multiple of 8), the middle one without a bias.
      const std::vector<at::Tensor> w{randn({37, k}, 10), randn({16, k}, 11), randn({13, k}, 12)};
      const std::vector<at::Tensor> b{randn({37}, 20), at::Tensor(), randn({13}, 22)};
      const at::Tensor x = randn({1, 1, k}, 1);
      const at::Tensor y = rollout::row_gemv(x, w, b, kernels);
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 1, 66}));
      // float64 reference, and the rounding bound of a k-term float32 sum:
      // |error| <= (k + 1) · 2^-24 · (Σ|x_j w_j| + |b|).
      const at::Tensor W = at::cat(w).to(at::kDouble), X = x.reshape({k}).to(at::kDouble);
      const at::Tensor B = at::cat({b[0], at::zeros({16}), b[2]}).to(at::kDouble);
      const at::Tensor want = at::mv(W, X) + B;
      const at::Tensor bound = (k + 1) * std::ldexp(1.0, -24) * (at::mv(W.abs(), X.abs()) + B.abs());
      const at::Tensor error = (y.reshape({66}).to(at::kDouble) - want).abs();
      EXPECT_TRUE((error <= bound).all().item<bool>())
          << kernels->name << " k=" << k << ": max error " << error.max().item<double>();
    }
}

TEST(RowGemv, AnOutputDoesNotDependOnTheRowsComputedWithItOrTheThreads) {
  const at::Tensor w = randn({45, 1100}, 2), x = randn({1100}, 3), b = randn({45}, 4);
  for (const cpu::Kernels* kernels : kernels_of_this_cpu()) {
    std::vector<float> all(45), part(45);
    kernels->gemv(w.data_ptr<float>(), 1100, 1100, x.data_ptr<float>(), b.data_ptr<float>(), 0, 45, all.data());
    // Rows 3..43 in blocks at another offset (3, 11, ...; 35..42, then 43 alone), row 44 alone.
    kernels->gemv(w.data_ptr<float>(), 1100, 1100, x.data_ptr<float>(), b.data_ptr<float>(), 3, 44, part.data());
    for (int64_t o = 3; o < 44; ++o) EXPECT_EQ(part[o], all[o]) << kernels->name << " row " << o;
    kernels->gemv(w.data_ptr<float>(), 1100, 1100, x.data_ptr<float>(), b.data_ptr<float>(), 44, 45, part.data());
    EXPECT_EQ(part[44], all[44]) << kernels->name;
  }
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = rollout::row_gemv(x, {w, w}, {b, b});
  at::set_num_threads(2);
  const at::Tensor two = rollout::row_gemv(x, {w, w}, {b, b});
  at::set_num_threads(threads);
  EXPECT_TRUE(one.equal(two));
  EXPECT_TRUE(one.narrow(0, 0, 45).equal(one.narrow(0, 45, 45)));  // the same weight at another offset
}

TEST(RowGemv, Bf16WeightsEqualTheWidenedValuesWithinFloat32RoundingForEveryKernel) {
  for (const cpu::Kernels* kernels : kernels_of_this_cpu())
    for (int64_t k : {3, 64, 1100}) {
      const at::Tensor w = randn({37, k}, 10).to(at::kBFloat16), x = randn({k}, 1), b = randn({37}, 20);
      std::vector<float> y(37);
      kernels->gemv_bf16(reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), k, k, x.data_ptr<float>(),
                         b.data_ptr<float>(), 0, 37, y.data());
      // The bf16 values widen exactly, so the float64 reference of the fp32 test applies.
      const at::Tensor W = w.to(at::kDouble), X = x.to(at::kDouble), B = b.to(at::kDouble);
      const at::Tensor want = at::mv(W, X) + B;
      const at::Tensor bound = (k + 1) * std::ldexp(1.0, -24) * (at::mv(W.abs(), X.abs()) + B.abs());
      const at::Tensor error = (at::tensor(y, at::kFloat).to(at::kDouble) - want).abs();
      EXPECT_TRUE((error <= bound).all().item<bool>())
          << kernels->name << " k=" << k << ": max error " << error.max().item<double>();
    }
}

TEST(RowGemv, ABf16RowEqualsLinearInBf16UpToOneRoundingOfItsSum) {
  // q/k/v-like weights with biases (a Qwen2 layer's): the output is the float32
  // sum rounded to bf16 once, so it is within one bf16 step (2^-8 relative) of
  // at::linear's, whose float32 sum adds in another order.
  const int64_t k = 896;
  const std::vector<at::Tensor> w{randn({64, k}, 30).to(at::kBFloat16), randn({16, k}, 31).to(at::kBFloat16)};
  const std::vector<at::Tensor> b{randn({64}, 32).to(at::kBFloat16), randn({16}, 33).to(at::kBFloat16)};
  const at::Tensor x = randn({1, 1, k}, 34).to(at::kBFloat16);
  ASSERT_TRUE(rollout::row_gemv_applies(x, w[0]));
  const at::Tensor y = rollout::row_gemv(x, w, b);
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor want = at::cat({at::linear(x, w[0], b[0]), at::linear(x, w[1], b[1])}, -1);
  const at::Tensor step = want.to(at::kFloat).abs() * std::ldexp(1.0, -8) + 1e-30;
  EXPECT_TRUE(((y.to(at::kFloat) - want.to(at::kFloat)).abs() <= step).all().item<bool>())
      << "max difference " << (y.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
}

TEST(RowGemv, AppliesToOneFloat32CpuRowAndAContiguousMatrixOfItsWidth) {
  const at::Tensor w = randn({4, 8}, 5);
  EXPECT_TRUE(rollout::row_gemv_applies(randn({1, 8}, 6), w));
  EXPECT_FALSE(rollout::row_gemv_applies(randn({2, 8}, 6), w));               // two rows: the packed GEMM's
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 8}, 6).to(at::kDouble), w));
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 8}, 6), w.t().contiguous().t()));  // strided rows
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 4}, 6), w));
  EXPECT_TRUE(rollout::row_gemv_applies(randn({1, 8}, 6).to(at::kBFloat16), w.to(at::kBFloat16)));
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 8}, 6), w.to(at::kBFloat16)));  // dtypes differ
}

}  // namespace
