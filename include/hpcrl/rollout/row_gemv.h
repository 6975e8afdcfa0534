// One decode row through linear layers on the CPU: a single token's
// projections read every weight once and do two FLOPs per weight, so they run
// at the speed weights stream from memory. The layers that read the same input
// (q/k/v, gate/up) go in one call, one pass over the threads instead of one
// per matrix. No packed copy: a call that decodes one row at a time reads the
// model's weights in place (packing them would cost more than the call, see
// slot_projections.h).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace hpcrl::rollout {

namespace cpu {
struct Kernels;
}

// True when row_gemv computes x · Wᵀ: x holds one row of float32 or bfloat16
// values on the CPU, and w is a contiguous [N, K] CPU matrix of its width and
// dtype. A bf16 row reads half the bytes; it is summed in float32 (x and the
// biases widened) and rounded to bf16 once, as LibTorch's CPU linear does.
bool row_gemv_applies(const at::Tensor& x, const at::Tensor& w);

// [..., Σ N_i]: x's one row times weights[i] ([N_i, K]) plus biases[i] ([N_i],
// or undefined: none), the outputs side by side in weight order, in a fresh
// tensor of x's leading shape. Precondition: row_gemv_applies(x, w) for every
// weight and biases.size() is 0 or weights.size(). `kernels` null: the widest
// this CPU runs.
at::Tensor row_gemv(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                    const std::vector<at::Tensor>& biases = {}, const cpu::Kernels* kernels = nullptr);

}  // namespace hpcrl::rollout
