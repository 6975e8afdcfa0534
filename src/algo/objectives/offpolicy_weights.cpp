// The decoupled objective's importance-weight metrics (offpolicy_weights.h).
#include "hpcrl/algo/objectives/offpolicy_weights.h"

#include <algorithm>

#include "hpcrl/algo/objectives/policy_loss.h"

namespace hpcrl::algo {

double add_offpolicy_sums(const at::Tensor& old_logp, const at::Tensor& behaviour_logp, const at::Tensor& mask,
                          double tis_cap, OffpolicySums& sums) {
  const at::Tensor m = mask.to(at::kDouble);
  const at::Tensor w = importance_weights(old_logp, behaviour_logp, 0).to(at::kDouble) * m;
  const at::Tensor kl = kl_estimate(behaviour_logp, old_logp, KlEstimator::k3).to(at::kDouble) * m;
  sums.weights += w.sum().item<double>();
  sums.capped += tis_cap > 0 ? ((w > tis_cap).to(at::kDouble) * m).sum().item<double>() : 0;
  sums.kl += kl.sum().item<double>();
  sums.tokens += m.sum().item<double>();
  return w.numel() ? w.max().item<double>() : 0.0;
}

std::vector<std::pair<std::string, double>> offpolicy_metrics(const OffpolicySums& total, double max_weight) {
  const double tokens = std::max(1.0, total.tokens);
  return {{"offpolicy/iw_mean", total.weights / tokens},
          {"offpolicy/iw_max", max_weight},
          {"offpolicy/iw_capped_share", total.capped / tokens},
          {"offpolicy/kl_behaviour_old", total.kl / tokens}};
}

}  // namespace hpcrl::algo
