// Loss aggregation modes (see loss_agg.h).
#include "hpcrl/algo/objectives/loss_agg.h"

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask) {
  at::Tensor m = mask.to(values.scalar_type());
  return (values * m).sum() / m.sum().clamp_min(1.0);
}

at::Tensor loss_weights(const at::Tensor& mask, LossAgg agg) {
  at::Tensor m = mask.to(at::kFloat);
  if (agg == LossAgg::seq_mean_token_mean) return m / m.sum(-1, /*keepdim=*/true).clamp_min(1.0);
  return m;
}

at::Tensor aggregate_numerator(const at::Tensor& values, const at::Tensor& mask, LossAgg agg) {
  HPCRL_CHECK(values.sizes() == mask.sizes(), "values " << values.sizes() << " vs mask " << mask.sizes());
  return (values * loss_weights(mask, agg).to(values.scalar_type())).sum();
}

double aggregate_denominator(const at::Tensor& mask, LossAgg agg) {
  if (agg == LossAgg::token_mean) return std::max(1.0, mask.sum().item<double>());
  return static_cast<double>(mask.size(0));
}

at::Tensor aggregate(const at::Tensor& values, const at::Tensor& mask, LossAgg agg) {
  return aggregate_numerator(values, mask, agg) / aggregate_denominator(mask, agg);
}

}  // namespace hpcrl::algo
