// The RL losses as pure functions of per-token tensors, so they can be checked
// against hand-computed values: the policy surrogates (PPO's clipped ratio with
// asymmetric clip — DAPO's clip-higher —, GSPO's sequence-level ratio, CISPO's
// clipped weight), KL-to-reference estimators, entropy bonus, clipped value loss.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "hpcrl/algo/objectives/loss_agg.h"

namespace hpcrl::algo {

using config::KlEstimator;  // k1 | k2 | k3, as the YAML spells it
using config::PolicyLossKind;  // ppo_clip | gspo | gspo_token | cispo

// Per-token KL(π‖π_ref) estimate from log-probs of the sampled tokens [B, T]:
// k1 = logp - ref; k2 = ½(logp - ref)²; k3 = exp(ref - logp) - (ref - logp) - 1
// (Schulman's unbiased, non-negative estimator; clamped to [-10, 10] like veRL).
at::Tensor kl_estimate(const at::Tensor& logp, const at::Tensor& ref_logp, KlEstimator est);

struct PolicyLossInputs {
  at::Tensor logp;        // [B, T] current policy log-probs of the sampled tokens (with grad)
  at::Tensor old_logp;    // [B, T] behaviour policy log-probs
  at::Tensor advantages;  // [B, T]
  at::Tensor mask;        // [B, T] 1 on response tokens
  at::Tensor ref_logp;    // [B, T] optional (undefined: no KL term)
  at::Tensor entropy;     // [B, T] optional (undefined: no entropy bonus)
  // [B, T] optional: the generating engine's log-probs when old_logp is the
  // trainer's recomputation (the decoupled objective; undefined: old_logp is behaviour).
  at::Tensor behaviour_logp;
  // [B, T] for gspo / gspo_token: at each token, its sequence's mean log-ratio
  // (1/|y|) Σ_t (logp − old_logp), without gradient (sequence_ratio.h computes
  // it across micro-batch layouts and sp ranks).
  at::Tensor seq_log_ratio;
};

struct PolicyLossConfig {
  PolicyLossKind kind = PolicyLossKind::ppo_clip;
  double clip_low = 0.2;    // ratio ≥ 1 - clip_low
  double clip_high = 0.2;   // ratio ≤ 1 + clip_high (DAPO: 0.28)
  LossAgg agg = LossAgg::token_mean;
  double kl_coef = 0.0;     // KL as a loss term (0: off)
  KlEstimator kl_estimator = KlEstimator::k3;
  double entropy_coef = 0.0;
  double tis_cap = 0.0;     // cap C of the behaviour importance weight (0: uncapped)
};

struct PolicyLossOutput {
  at::Tensor loss;       // scalar, differentiable
  at::Tensor per_token;  // [B, T] pg + kl_coef·kl - entropy_coef·entropy (aggregate it with a global denominator)
  double pg_loss = 0;    // surrogate part
  double clip_frac = 0;  // fraction of tokens where the clipped branch was active
  double kl = 0;         // masked mean KL estimate (0 without ref_logp)
  double entropy = 0;    // masked mean entropy (0 without entropy)
  double ratio_mean = 0;
};

// The surrogate pg per token, r = exp(logp - old_logp):
//   ppo_clip    max(-A·r, -A·clip(r, 1-ε_low, 1+ε_high))
//   gspo(_token) the same with r replaced by s·exp(logp - sg(logp)), s = exp(seq_log_ratio):
//               the value is the sequence's ratio s and the gradient s·∇logp, which, with one
//               A per sequence and any loss_agg (uniform weights within a sequence), is the
//               gradient of GSPO's sequence-level max(-A·s, -A·clip(s)) (Zheng et al. 2025, §4.2)
//   cispo       -A·sg(clip(r))·(1 + logp - sg(logp)): the value -A·clip(r), the gradient -A·clip(r)·∇logp —
//               CISPO's stop-gradient clipped weight: no token loses its gradient
// With behaviour_logp (AReaL's decoupled PPO): pg · w, w = importance_weights(old, behaviour, tis_cap);
// loss = agg(pg) + kl_coef·agg(kl) - entropy_coef·agg(entropy).
PolicyLossOutput policy_loss(const PolicyLossInputs& in, const PolicyLossConfig& cfg);

// w = min(π_old/π_behaviour, C) = min(exp(old_logp - behaviour_logp), C) per
// token, C = cap (0: no cap), without gradient: it re-weights samples drawn by
// the engine (stale weights, or the same weights computed another way) to the
// trainer's old policy, and the cap bounds the variance a rare token can add.
at::Tensor importance_weights(const at::Tensor& old_logp, const at::Tensor& behaviour_logp, double cap);

// Clipped value loss: ½·max((v - R)², (v_old + clip(v - v_old, ±c) - R)²), aggregated token_mean.
// Returns {loss, clip fraction}.
std::pair<at::Tensor, double> value_loss(const at::Tensor& values, const at::Tensor& old_values,
                                         const at::Tensor& returns, const at::Tensor& mask, double clip);

}  // namespace hpcrl::algo
