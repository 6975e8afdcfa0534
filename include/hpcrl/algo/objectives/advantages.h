// Advantage estimators as pure tensor functions: GRPO's group-relative
// advantage (optionally without std normalisation: Dr.GRPO), RLOO's
// leave-one-out baseline, the pieces of REINFORCE++ (token returns, moments
// for whitening over a batch that spans ranks) and PPO's GAE.
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

// rewards, values, mask: [B, T] per position (mask 1 on the tokens the model
// sampled). The recursion runs over the masked tokens only: a token's "next"
// is the next masked one, so a multi-turn trajectory's tool replies (mask 0
// between sampled tokens) pass the advantage and value through unchanged.
// Value after the last masked token is 0.
// Advantages are whitened over masked tokens when `whiten`.
GaeResult gae(const at::Tensor& rewards, const at::Tensor& values, const at::Tensor& mask, double gamma,
              double lam, bool whiten = true);

// Per-token rewards for PPO and REINFORCE++: -kl_coef·kl at every token, plus
// the sequence score at the last response token. kl, mask: [B, T]; scores: [B].
at::Tensor kl_shaped_rewards(const at::Tensor& scores, const at::Tensor& kl, const at::Tensor& mask,
                             double kl_coef);

// [B] int64: the largest position where mask is set (0 for an empty row).
at::Tensor last_response_position(const at::Tensor& mask);

// RLOO (Ahmadian et al. 2024): r_i − mean of the other G−1 rewards of its group
// (= G/(G−1)·(r_i − mean_group)). scores [N·G] grouped consecutively, G ≥ 2.
at::Tensor rloo_advantages(const at::Tensor& scores, int64_t group);

// [N·G]: each sample's group std (unbiased), what std_norm: group divides by.
at::Tensor group_std(const at::Tensor& scores, int64_t group);

// REINFORCE++'s return (γ = 1): at each masked token the sum of the token
// rewards from it to the end of its row. [B, T].
at::Tensor reverse_cumsum_returns(const at::Tensor& token_rewards, const at::Tensor& mask);

// Count, sum and sum of squares of the masked values: the sufficient
// statistics of a mean and std, which add up over dp ranks (a batch-wide
// normalisation is a reduction of these, not a per-rank mean).
struct Moments {
  double n = 0, sum = 0, sum_sq = 0;
  double mean() const;
  double variance(bool unbiased) const;  // 0 when there are too few values
};
Moments moments_of(const at::Tensor& values, const at::Tensor& mask);

}  // namespace hpcrl::algo
