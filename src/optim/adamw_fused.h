// AdamW's update as one pass over raw fp32 arrays (adamw.cpp runs it on dense CPU
// tensors, split over threads). Torch-free, compiled with the flags that let GCC
// vectorise it (CMakeLists.txt).
#pragma once

#include <cstdint>

namespace hpcrl::optim {

// The step's constants, in the float the arithmetic runs in.
struct AdamWFactors {
  float decay;            // 1 − lr·weight_decay (1: no decay)
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 − β2^t)
  float neg_step_size;          // −lr / (1 − β1^t)
  float eps;
};

// For i in [0, n): w = w·decay; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g·g;
// w += neg_step_size · m / (sqrt(v) / bias_correction2_sqrt + eps). Each element's
// result depends on nothing but its own inputs (not on i, n or the vector lane).
void adamw_fused(float* w, const float* g, float* m, float* v, int64_t n, AdamWFactors f);

}  // namespace hpcrl::optim
