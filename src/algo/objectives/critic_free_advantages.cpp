// Critic-free advantage estimators (see critic_free_advantages.h).
#include "hpcrl/algo/objectives/critic_free_advantages.h"

#include <cmath>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
using config::AdvantageEstimator;
using config::StdNorm;

constexpr double kStdEps = 1e-6;    // as group_advantages: a group of equal rewards gives 0, not NaN
constexpr double kWhitenEps = 1e-8; // as GAE's whitening

// The masked values' moments over the policy's whole batch (all dp replicas).
Moments global_moments(const Role& policy, const at::Tensor& values, const at::Tensor& mask) {
  return unpack<Moments>(sum_over_dp(policy, pack(moments_of(values, mask))));
}

// [B]: a sequence's reward against its group's (grpo: the group mean; rloo:
// the mean of the other G−1), divided as std_norm says.
at::Tensor group_relative(const config::GrpoStage& cfg, const Role& policy, const at::Tensor& scores) {
  if (cfg.advantage == AdvantageEstimator::grpo && cfg.std_norm == StdNorm::group)
    return group_advantages(scores, cfg.group, /*std_norm=*/true, kStdEps);
  at::Tensor centred = cfg.advantage == AdvantageEstimator::rloo ? rloo_advantages(scores, cfg.group)
                                                                 : group_advantages(scores, cfg.group, false);
  switch (cfg.std_norm) {
    case StdNorm::group:
      return centred / (group_std(scores, cfg.group) + kStdEps);
    case StdNorm::batch: {
      const Moments m = global_moments(policy, scores, at::ones_like(scores));
      return centred / (std::sqrt(m.variance(/*unbiased=*/true)) + kStdEps);
    }
    case StdNorm::none:
      return centred;
  }
  return centred;
}

// [B, T]: REINFORCE++'s token returns (the baseline variant subtracts the group
// mean from the scores first), whitened over the global batch's tokens.
at::Tensor reinforce_pp(const config::GrpoStage& cfg, KlEstimator kl_estimator, const Role& policy,
                        const Experience& exp) {
  const at::Tensor& mask = exp.batch.loss_mask;
  at::Tensor scores = exp.scores.to(at::kFloat);
  if (cfg.advantage == AdvantageEstimator::reinforce_pp_baseline)
    scores = group_advantages(scores, cfg.group, /*std_norm=*/false);
  const bool kl_in_reward = exp.ref_logp.defined() && cfg.kl.in_reward && cfg.kl.coef != 0.0;
  at::Tensor kl = kl_in_reward ? kl_estimate(exp.old_logp, exp.ref_logp, kl_estimator) : at::zeros_like(mask);
  at::Tensor returns = reverse_cumsum_returns(kl_shaped_rewards(scores, kl, mask, kl_in_reward ? cfg.kl.coef : 0.0), mask);
  if (cfg.std_norm == StdNorm::none) return returns;
  const Moments m = global_moments(policy, returns, mask);
  return (returns - m.mean()) / std::sqrt(m.variance(/*unbiased=*/false) + kWhitenEps) * mask;
}
}  // namespace

void critic_free_advantages(const config::GrpoStage& cfg, KlEstimator kl_estimator, const Role& policy,
                            Experience& exp) {
  trace::ScopedSpan span("grpo/advantage");
  const at::Tensor& mask = exp.batch.loss_mask;
  if (cfg.advantage == AdvantageEstimator::reinforce_pp || cfg.advantage == AdvantageEstimator::reinforce_pp_baseline) {
    exp.advantages = reinforce_pp(cfg, kl_estimator, policy, exp);
    return;
  }
  if (exp.ref_logp.defined() && cfg.kl.in_reward && cfg.kl.coef != 0.0) {
    at::Tensor kl = kl_estimate(exp.old_logp, exp.ref_logp, kl_estimator);
    exp.scores = exp.scores - cfg.kl.coef * (kl * mask).sum(1);
  }
  exp.advantages = group_relative(cfg, policy, exp.scores).unsqueeze(1) * mask;  // [B, T]
}

}  // namespace hpcrl::algo
