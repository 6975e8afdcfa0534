// Clipped surrogate, KL estimators and value loss (see policy_loss.h).
#include "hpcrl/algo/objectives/policy_loss.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

at::Tensor kl_estimate(const at::Tensor& logp, const at::Tensor& ref_logp, KlEstimator est) {
  at::Tensor diff = logp - ref_logp;
  switch (est) {
    case KlEstimator::k1:
      return diff;
    case KlEstimator::k2:
      return 0.5 * diff.pow(2);
    case KlEstimator::k3: {
      at::Tensor neg = -diff;  // ref - logp
      return (at::exp(neg) - neg - 1.0).clamp(-10.0, 10.0);
    }
  }
  return diff;
}

namespace {
struct Surrogate {
  at::Tensor pg;       // [B, T] per-token surrogate loss
  at::Tensor clipped;  // [B, T] where the clip changed the value
  at::Tensor ratio;    // [B, T] the ratio the surrogate weighs A by (detached)
};

Surrogate clipped_ratio_surrogate(const at::Tensor& ratio, const at::Tensor& adv, const PolicyLossConfig& cfg) {
  at::Tensor pg1 = -adv * ratio;
  at::Tensor pg2 = -adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high);
  return {at::maximum(pg1, pg2), pg2 > pg1, ratio.detach()};
}

Surrogate surrogate(const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  switch (cfg.kind) {
    case PolicyLossKind::ppo_clip:
      return clipped_ratio_surrogate(at::exp(in.logp - in.old_logp), in.advantages, cfg);
    case PolicyLossKind::gspo:
    case PolicyLossKind::gspo_token: {
      HPCRL_CHECK(in.seq_log_ratio.defined() && in.seq_log_ratio.sizes() == in.logp.sizes(),
                  "gspo needs the per-token sequence log-ratio [B, T]");
      return clipped_ratio_surrogate(at::exp(in.seq_log_ratio.detach() + in.logp - in.logp.detach()),
                                     in.advantages, cfg);
    }
    case PolicyLossKind::cispo: {
      // (1 + logp − sg(logp)) is 1 with gradient ∇logp: no division by a ratio that may underflow.
      at::Tensor r = at::exp(in.logp - in.old_logp).detach();
      at::Tensor capped = r.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high);
      return {-in.advantages * capped * (1.0 + in.logp - in.logp.detach()), capped != r, r};
    }
  }
  HPCRL_CHECK(false, "unknown policy loss");
  return {};
}
}  // namespace

PolicyLossOutput policy_loss(const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  HPCRL_CHECK(in.logp.sizes() == in.old_logp.sizes() && in.logp.sizes() == in.advantages.sizes() &&
                  in.logp.sizes() == in.mask.sizes(),
              "logp " << in.logp.sizes() << ", old_logp " << in.old_logp.sizes() << ", advantages "
                      << in.advantages.sizes() << ", mask " << in.mask.sizes() << " must all be [B, T]");
  at::Tensor m = in.mask.to(in.logp.scalar_type());
  Surrogate sur = surrogate(in, cfg);
  at::Tensor pg = sur.pg;
  if (in.behaviour_logp.defined()) pg = pg * importance_weights(in.old_logp, in.behaviour_logp, cfg.tis_cap);

  PolicyLossOutput out;
  at::Tensor per_token = pg;
  out.pg_loss = aggregate(pg.detach(), m, cfg.agg).item<double>();
  out.clip_frac = masked_mean(sur.clipped.to(m.scalar_type()), m).item<double>();
  out.ratio_mean = masked_mean(sur.ratio, m).item<double>();
  if (in.ref_logp.defined()) {
    at::Tensor kl = kl_estimate(in.logp, in.ref_logp, cfg.kl_estimator);
    out.kl = masked_mean(kl.detach(), m).item<double>();
    if (cfg.kl_coef != 0.0) per_token = per_token + cfg.kl_coef * kl;
  }
  if (in.entropy.defined()) {
    out.entropy = masked_mean(in.entropy.detach(), m).item<double>();
    if (cfg.entropy_coef != 0.0) per_token = per_token - cfg.entropy_coef * in.entropy;
  }
  out.per_token = per_token;
  out.loss = aggregate(per_token, m, cfg.agg);
  return out;
}

at::Tensor importance_weights(const at::Tensor& old_logp, const at::Tensor& behaviour_logp, double cap) {
  at::Tensor w = at::exp(old_logp.detach() - behaviour_logp.detach());
  return cap > 0 ? w.clamp_max(cap) : w;
}

std::pair<at::Tensor, double> value_loss(const at::Tensor& values, const at::Tensor& old_values,
                                         const at::Tensor& returns, const at::Tensor& mask, double clip) {
  at::Tensor m = mask.to(values.scalar_type());
  at::Tensor clipped = old_values + (values - old_values).clamp(-clip, clip);
  at::Tensor l1 = (values - returns).pow(2);
  at::Tensor l2 = (clipped - returns).pow(2);
  at::Tensor loss = 0.5 * masked_mean(at::maximum(l1, l2), m);
  double frac = masked_mean((l2 > l1).to(m.scalar_type()), m).item<double>();
  return {loss, frac};
}

}  // namespace hpcrl::algo
