// The engine's CPU kernels, one copy per instruction set (cpu_kernels.h). Each
// copy is cpu_kernels.inc compiled under its own target pragma in its own
// namespace, so nothing of the wider code can be called on a CPU without it:
// kernels_for() hands out a copy only after the CPU says it has the features.
#include "rollout/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HPCRL_X86_KERNELS 1
#include <immintrin.h>  // usable inside the target pragmas below (packing's 8 × 8 transpose)
#endif

namespace hpcrl::rollout::cpu {

namespace {

#ifdef HPCRL_X86_KERNELS
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")
namespace avx512 {
#define HPCRL_VEC_BYTES 64
#define HPCRL_TILE_ROWS 6      // 6 × 4 accumulators + 4 weight vectors + 1 broadcast of 32 zmm registers
#define HPCRL_PANEL_VECTORS 4
#include "rollout/cpu_kernels.inc"
#undef HPCRL_VEC_BYTES
#undef HPCRL_TILE_ROWS
#undef HPCRL_PANEL_VECTORS
}  // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#define HPCRL_VEC_BYTES 32
#define HPCRL_TILE_ROWS 6      // 6 × 2 accumulators + 2 + 1 of 16 ymm registers
#define HPCRL_PANEL_VECTORS 2
#include "rollout/cpu_kernels.inc"
#undef HPCRL_VEC_BYTES
#undef HPCRL_TILE_ROWS
#undef HPCRL_PANEL_VECTORS
}  // namespace avx2
#pragma GCC pop_options
#endif

namespace baseline {
#define HPCRL_VEC_BYTES 16
#define HPCRL_TILE_ROWS 4
#define HPCRL_PANEL_VECTORS 2
#include "rollout/cpu_kernels.inc"
#undef HPCRL_VEC_BYTES
#undef HPCRL_TILE_ROWS
#undef HPCRL_PANEL_VECTORS
}  // namespace baseline

// The table of one instruction set's namespace.
#define HPCRL_KERNELS(isa, ns)                                                                             \
  Kernels {                                                                                                \
    isa, #ns, ns::kPanel, ns::gemm, ns::pack_panel, ns::gemv, ns::gemv_bf16, ns::row_max, ns::row_exp,     \
        ns::rms_norm, ns::rotate, ns::attend                                                               \
  }
const Kernels kBaseline = HPCRL_KERNELS(Isa::kBaseline, baseline);
#ifdef HPCRL_X86_KERNELS
const Kernels kAvx2 = HPCRL_KERNELS(Isa::kAvx2, avx2);
const Kernels kAvx512 = HPCRL_KERNELS(Isa::kAvx512, avx512);
#endif
#undef HPCRL_KERNELS

}  // namespace

const Kernels* kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return &kBaseline;
#ifdef HPCRL_X86_KERNELS
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &kAvx2 : nullptr;
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
                 ? &kAvx512
                 : nullptr;
#endif
    default:
      return nullptr;
  }
}

const Kernels& best_kernels() {
  static const Kernels* best = [] {
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2})
      if (const Kernels* k = kernels_for(isa)) return k;
    return &kBaseline;
  }();
  return *best;
}

}  // namespace hpcrl::rollout::cpu
