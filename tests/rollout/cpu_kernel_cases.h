// What the tests of the engine's CPU kernels share (packed_linear_test.cpp,
// row_gemv_test.cpp): every instruction set this CPU runs, and float32 inputs
// from a fixed seed.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <vector>

#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout::test {

inline std::vector<const cpu::Kernels*> kernels_of_this_cpu() {
  std::vector<const cpu::Kernels*> out;
  for (cpu::Isa isa : {cpu::Isa::kBaseline, cpu::Isa::kAvx2, cpu::Isa::kAvx512})
    if (const cpu::Kernels* k = cpu::kernels_for(isa)) out.push_back(k);
  return out;
}

inline at::Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::kFloat);
}

}  // namespace hpcrl::rollout::test
