// Layout-aware gradient norm (see grad_clip.h).
#include "hpcrl/optim/grad_clip.h"

#include <torch/utils.h>

#include <cmath>

namespace hpcrl::optim {

double global_grad_norm(const ParamSet& params, const parallel::ParallelContext& ctx) {
  // [replicated, tp shards, ep shards] squared sums, in double for a stable sum.
  at::Tensor sq = at::zeros({3}, at::kDouble);
  for (const auto& p : params) {
    at::Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    double s = g.detach().to(at::kDouble).pow(2).sum().item<double>() / double(p.replicas);
    sq[static_cast<int>(p.sharding)] += s;
  }
  return grad_norm_from_parts(sq, ctx);
}

double grad_norm_from_parts(const at::Tensor& squared_sums, const parallel::ParallelContext& ctx) {
  const at::Tensor& sq = squared_sums;
  at::Tensor tp_part = sq.slice(0, 1, 2).clone();
  at::Tensor ep_part = sq.slice(0, 2, 3).clone();
  if (ctx.tp && ctx.tp->size() > 1) ctx.tp->all_reduce(tp_part);
  if (ctx.ep && ctx.ep->size() > 1) ctx.ep->all_reduce(ep_part);
  at::Tensor total = sq.slice(0, 0, 1) + tp_part + ep_part;
  if (ctx.pp && ctx.pp->size() > 1) ctx.pp->all_reduce(total);
  return std::sqrt(total.item<double>());
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(norm) || norm <= max_norm) return 1.0;
  return max_norm / (norm + 1e-6);
}

double clip_grad_norm(const ParamSet& params, double max_norm, const parallel::ParallelContext& ctx) {
  double norm = global_grad_norm(params, ctx);
  double scale = clip_coefficient(norm, max_norm);
  if (scale == 1.0) return norm;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    at::Tensor g = p.tensor.mutable_grad();
    if (g.defined()) g.mul_(scale);
  }
  return norm;
}

}  // namespace hpcrl::optim
