// The decoupled objective's importance weights w = π_old/π_behaviour
// (policy_loss.h's importance_weights, uncapped) over a batch's response
// tokens, as metrics: offpolicy/iw_mean, offpolicy/iw_max,
// offpolicy/iw_capped_share (the tokens whose w exceeds tis_cap) and
// offpolicy/kl_behaviour_old (mean k3 estimate of KL(π_behaviour ‖ π_old)).
// Taken after the old-log-prob pass or inside the update whose forward is π_old.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace hpcrl::algo {

// What a rank adds up over its response tokens (summed over the policy's ranks).
struct OffpolicySums {
  double weights = 0, capped = 0, kl = 0, tokens = 0;
};

// Adds this rank's sums over the tokens where `mask` is 1 ([B, T] each); returns the largest
// w there (0 without tokens). `tis_cap` 0: nothing counts as capped.
double add_offpolicy_sums(const at::Tensor& old_logp, const at::Tensor& behaviour_logp, const at::Tensor& mask,
                          double tis_cap, OffpolicySums& sums);

// The metrics of the reduced sums and the largest w.
std::vector<std::pair<std::string, double>> offpolicy_metrics(const OffpolicySums& total, double max_weight);

}  // namespace hpcrl::algo
