// AdamW over many tensors at once, for devices where every LibTorch op costs a
// host dispatch and a kernel launch (a GPU: the quickstart's SFT step spent
// 6.2 of 23.4 ms in a per-tensor optimizer on an H200). Which update a
// parameter set gets is decided once, from where its tensors live:
//
//   kPerTensor    dense fp32 CPU tensors: adamw_update's vectorised pass, one
//                 tensor at a time (memory-bound there; no dispatch to save)
//   kMultiTensor  LibTorch's _foreach ops: nine launches for the whole set,
//                 op for op the update of adamw_update_with_ops
//   kFused        LibTorch 2.x's _fused_adamw_: one kernel for the whole set
//                 (the bias corrections in the kernel, so within rounding)
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/optim/adamw.h"

namespace hpcrl::optim {

// Whether this LibTorch has _fused_adamw_ (2.x; its CPU kernel since 2.4).
bool has_fused_adamw();
// kPerTensor when every tensor is a CPU tensor, else kFused where
// has_fused_adamw(), else kMultiTensor.
AdamWKernel adamw_kernel_for(const std::vector<at::Tensor>& weights);
const char* to_string(AdamWKernel kernel);

// The tensors one AdamW update walks, index by index: the weights w and the
// moments m, v (fp32, updated in place) and the gradients g (any float dtype:
// cast to fp32 first where it differs). The vectors hold tensor handles.
struct AdamWTensors {
  std::vector<at::Tensor> w, g, m, v;
};

// One AdamW update at step `step` (1-based) of every t.w[i] from t.g[i] with
// moments t.m[i], t.v[i], in place. kPerTensor runs adamw_update on each.
void adamw_update_all(AdamWKernel kernel, AdamWTensors& t, double lr, int64_t step, const AdamWOptions& o);

// L2 norms of `tensors` as one [n] fp32 tensor on their device, by one
// _foreach_norm (no host sync: the caller reads the sum once).
at::Tensor norms_of(const std::vector<at::Tensor>& tensors);

}  // namespace hpcrl::optim
