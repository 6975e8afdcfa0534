// AdamW's fused pass (adamw_fused.h). Compiled without errno for sqrt and with the
// vectoriser's dynamic cost model (CMakeLists.txt): at -O2's default the loop stays
// scalar, a square root and a division per element, half the speed of the memory.
// ISO C++ mode contracts no multiply-adds, so the vector body and the scalar tail
// round the same operations the same way.
#include "optim/adamw_fused.h"

#include <cmath>

namespace hpcrl::optim {

void adamw_fused(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                 const AdamWFactors f) {
  // `f` by value: a local copy no store to w, m or v can change, so its fields stay in registers.
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * f.beta1 + f.one_minus_beta1 * gi;
    const float vi = v[i] * f.beta2 + f.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * f.decay + f.neg_step_size * mi / (std::sqrt(vi) / f.bias_correction2_sqrt + f.eps);
  }
}

}  // namespace hpcrl::optim
