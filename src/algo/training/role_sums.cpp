// Sums over a role's groups (see role_sums.h).
#include "hpcrl/algo/training/role_sums.h"

#include "hpcrl/algo/training/pipeline_train.h"

namespace hpcrl::algo {

at::Tensor sum_over_dp(const Role& role, const at::Tensor& local) {
  at::Tensor t = local.clone();
  dist::all_reduce(role.ctx.dp, t);
  return t;
}

double sum_over_dp(const Role& role, double local) {
  return sum_over_dp(role, at::full({1}, local, at::kDouble)).item<double>();
}

void sum_step_values(const Role& role, at::Tensor& values) {
  share_from_last_stage(role, values);
  dist::all_reduce(role.ctx.grad, values);
}

void max_step_values(const Role& role, at::Tensor& values) {
  share_from_last_stage(role, values);
  dist::all_reduce(role.ctx.grad, values, dist::ReduceOp::kMax);
}

}  // namespace hpcrl::algo
