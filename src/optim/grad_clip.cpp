// Layout-aware gradient norm (see grad_clip.h).
#include "hpcrl/optim/grad_clip.h"

#include <torch/utils.h>

#include <cmath>
#include <vector>

#include "hpcrl/optim/adamw_multi_tensor.h"

namespace hpcrl::optim {

namespace {

// [replicated, tp shards, ep shards] squared sums, one .item() per gradient: on
// the CPU, where an op costs no launch, in double for a stable sum.
at::Tensor squared_sums_per_tensor(const ParamSet& params) {
  at::Tensor sq = at::zeros({3}, at::kDouble);
  for (const auto& p : params) {
    at::Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    double s = g.detach().to(at::kDouble).pow(2).sum().item<double>() / double(p.replicas);
    sq[static_cast<int>(p.sharding)] += s;
  }
  return sq;
}

// The same sums from one _foreach_norm per sharding kind and one copy to the
// host at the end: on a GPU, where each op is a launch and each .item() a sync.
at::Tensor squared_sums_multi_tensor(const ParamSet& params) {
  at::Tensor sq = at::zeros({3}, at::kDouble);
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<at::Tensor> grads;
    std::vector<double> replicas;
    for (const auto& p : params)
      if (static_cast<int>(p.sharding) == kind && p.tensor.grad().defined()) {
        grads.push_back(p.tensor.grad().detach());
        replicas.push_back(double(p.replicas));
      }
    if (grads.empty()) continue;
    at::Tensor norms = norms_of(grads).to(at::kDouble);
    at::Tensor per_copy = at::tensor(replicas, at::kDouble).to(norms.device());
    sq[kind] = (norms.pow(2) / per_copy).sum().cpu();
  }
  return sq;
}

bool any_gradient_off_cpu(const ParamSet& params) {
  for (const auto& p : params)
    if (p.tensor.grad().defined() && !p.tensor.grad().device().is_cpu()) return true;
  return false;
}

}  // namespace

double global_grad_norm(const ParamSet& params, const parallel::ParallelContext& ctx) {
  return any_gradient_off_cpu(params) ? global_grad_norm_multi_tensor(params, ctx)
                                      : global_grad_norm_per_tensor(params, ctx);
}

double global_grad_norm_per_tensor(const ParamSet& params, const parallel::ParallelContext& ctx) {
  torch::NoGradGuard no_grad;
  return grad_norm_from_parts(squared_sums_per_tensor(params), ctx);
}

double global_grad_norm_multi_tensor(const ParamSet& params, const parallel::ParallelContext& ctx) {
  torch::NoGradGuard no_grad;
  return grad_norm_from_parts(squared_sums_multi_tensor(params), ctx);
}

double grad_norm_from_parts(const at::Tensor& squared_sums, const parallel::ParallelContext& ctx) {
  const at::Tensor& sq = squared_sums;
  at::Tensor tp_part = sq.slice(0, 1, 2).clone();
  at::Tensor ep_part = sq.slice(0, 2, 3).clone();
  dist::all_reduce(ctx.tp, tp_part);
  dist::all_reduce(ctx.ep, ep_part);
  at::Tensor total = sq.slice(0, 0, 1) + tp_part + ep_part;
  dist::all_reduce(ctx.pp, total);
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
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.mutable_grad());
  if (!grads.empty()) at::_foreach_mul_(grads, scale);
  return norm;
}

}  // namespace hpcrl::optim
