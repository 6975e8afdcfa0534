// Advantage estimators as pure tensor functions: GRPO's group-relative
// advantage (optionally without std normalisation: Dr.GRPO) and PPO's GAE.
#pragma once

#include <ATen/ATen.h>

namespace hpcrl::algo {

// scores: [N·G] sequence rewards, grouped consecutively (G responses per prompt).
// Returns [N·G]: (s - mean_group) / (std_group + eps) with the unbiased std,
// or s - mean_group when !std_norm. A group of identical scores gives zeros.
at::Tensor group_advantages(const at::Tensor& scores, int64_t group, bool std_norm, double eps = 1e-6);

struct GaeResult {
  at::Tensor advantages;  // [B, T]
  at::Tensor returns;     // [B, T] = advantages + values (value targets)
};

// rewards, values, mask: [B, T] per response token (mask 1 on real tokens,
// response tokens contiguous from t=0). Value after the last token is 0.
// Advantages are whitened over masked tokens when `whiten`.
GaeResult gae(const at::Tensor& rewards, const at::Tensor& values, const at::Tensor& mask, double gamma,
              double lam, bool whiten = true);

// Per-token rewards for PPO: -kl_coef·kl at every token, plus the sequence
// score at the last response token. kl, mask: [B, T]; scores: [B].
at::Tensor kl_shaped_rewards(const at::Tensor& scores, const at::Tensor& kl, const at::Tensor& mask,
                             double kl_coef);

}  // namespace hpcrl::algo
