// The engine's one-row GEMV (row_gemv.h, cpu::Kernels::gemv), for every
// instruction set this CPU runs: equal to x·Wᵀ + b within the rounding bound
// of a float32 sum, for depths below a vector, of whole vectors and with a
// tail, and weights whose rows are not a multiple of the 8-row block; and an
// output does not depend on the range of rows computed with it or the threads.
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

TEST(RowGemv, AppliesToOneFloat32CpuRowAndAContiguousMatrixOfItsWidth) {
  const at::Tensor w = randn({4, 8}, 5);
  EXPECT_TRUE(rollout::row_gemv_applies(randn({1, 8}, 6), w));
  EXPECT_FALSE(rollout::row_gemv_applies(randn({2, 8}, 6), w));               // two rows: the packed GEMM's
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 8}, 6).to(at::kDouble), w));
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 8}, 6), w.t().contiguous().t()));  // strided rows
  EXPECT_FALSE(rollout::row_gemv_applies(randn({1, 4}, 6), w));
}

}  // namespace
