// AdamW's fused pass (adamw_fused.h). Compiled without errno for sqrt and with the
// vectoriser's dynamic cost model (CMakeLists.txt): at -O2's default the loop stays
// scalar, a square root and a division per element, half the speed of the memory.
// ISO C++ mode contracts no multiply-adds, so the vector body and the scalar tail
// round the same operations the same way.
#include "optim/adamw_fused.h"

#include <cmath>

namespace hpcrl::optim {

namespace {
void update(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
            float decay, float b1, float omb1, float b2, float omb2, float bc2_sqrt, float neg_step, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * b1 + omb1 * gi;
    const float vi = v[i] * b2 + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay + neg_step * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}
}  // namespace

void adamw_fused(float* w, const float* g, float* m, float* v, int64_t n, const AdamWFactors& f) {
  // Scalars by value: through the struct, every store to w, m or v could change them.
  update(w, g, m, v, n, f.decay, f.beta1, f.one_minus_beta1, f.beta2, f.one_minus_beta2, f.bias_correction2_sqrt,
         f.neg_step_size, f.eps);
}

}  // namespace hpcrl::optim
