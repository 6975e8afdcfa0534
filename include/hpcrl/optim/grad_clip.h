// Global gradient-norm clipping that is correct for any layout: tp/ep shards
// add their squared norms across their group, replicated parameters count once,
// pp stages add up. Run after the data-parallel sync (grads are then equal over dp·sp).
#pragma once

#include "hpcrl/optim/param_set.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::optim {

// Global L2 norm of all gradients of the model replica. On the CPU one sum per
// gradient in double; where a gradient is on another device (a GPU), one
// _foreach_norm per sharding kind and a single copy to the host instead.
double global_grad_norm(const ParamSet& params, const parallel::ParallelContext& ctx);
// Its two paths, on any device (for tests and benchmarks).
double global_grad_norm_per_tensor(const ParamSet& params, const parallel::ParallelContext& ctx);
double global_grad_norm_multi_tensor(const ParamSet& params, const parallel::ParallelContext& ctx);

// The global norm from this rank's squared sums [3] (double: replicated, tp
// shards, ep shards, each already divided by its replicas), reduced over tp,
// ep and pp as above. Sharded optimizers (ZeRO-1) pass sums of their shards
// already summed over the data-parallel group.
double grad_norm_from_parts(const at::Tensor& squared_sums, const parallel::ParallelContext& ctx);

// The factor clipping applies to every gradient for a pre-clip `norm`
// (1 when max_norm ≤ 0, the norm is within it, or it is not finite).
double clip_coefficient(double norm, double max_norm);

// Scales gradients (one _foreach_mul_) so the global norm is at most `max_norm` (≤ 0: no clipping).
// Returns the norm before clipping. A non-finite norm is returned unchanged and
// nothing is scaled: the caller stops the run with a message.
double clip_grad_norm(const ParamSet& params, double max_norm, const parallel::ParallelContext& ctx);

}  // namespace hpcrl::optim
