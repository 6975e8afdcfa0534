// GRPO group advantages, GAE and KL-shaped rewards (see advantages.h).
#include "hpcrl/algo/objectives/advantages.h"

#include "hpcrl/algo/objectives/loss_agg.h"
#include "hpcrl/util/check.h"

#include <algorithm>

namespace hpcrl::algo {

at::Tensor group_advantages(const at::Tensor& scores, int64_t group, bool std_norm, double eps) {
  HPCRL_CHECK(scores.dim() == 1 && group > 0 && scores.size(0) % group == 0,
              "scores " << scores.sizes() << " must be [N*G] with G=" << group);
  at::Tensor s = scores.to(at::kFloat).view({-1, group});  // [N, G]
  at::Tensor centered = s - s.mean(1, /*keepdim=*/true);
  if (std_norm && group > 1) centered = centered / (s.std(1, /*unbiased=*/true, /*keepdim=*/true) + eps);
  return centered.reshape({-1});
}

GaeResult gae(const at::Tensor& rewards, const at::Tensor& values, const at::Tensor& mask, double gamma,
              double lam, bool whiten) {
  HPCRL_CHECK(rewards.sizes() == values.sizes() && rewards.sizes() == mask.sizes(),
              "rewards " << rewards.sizes() << ", values " << values.sizes() << ", mask " << mask.sizes());
  const int64_t T = rewards.size(1);
  at::Tensor m = mask.to(at::kFloat);
  at::Tensor v = values.to(at::kFloat) * m;
  at::Tensor r = rewards.to(at::kFloat) * m;
  at::Tensor adv = at::zeros_like(r);
  // The next masked token's advantage and value, carried back over unmasked
  // positions: 0 past the response (padding), unchanged across a tool reply.
  at::Tensor last = at::zeros({r.size(0)}, r.options());
  at::Tensor next_v = at::zeros_like(last);
  for (int64_t t = T - 1; t >= 0; --t) {
    const at::Tensor mt = m.select(1, t), vt = v.select(1, t);
    at::Tensor delta = r.select(1, t) + gamma * next_v - vt;
    last = mt * (delta + gamma * lam * last) + (1 - mt) * last;
    next_v = mt * vt + (1 - mt) * next_v;
    adv.select(1, t).copy_(last * mt);
  }
  GaeResult out;
  out.returns = adv + v;
  if (whiten) {
    at::Tensor mean = masked_mean(adv, m);
    at::Tensor var = masked_mean((adv - mean).pow(2), m);
    adv = (adv - mean) * at::rsqrt(var + 1e-8) * m;
  }
  out.advantages = adv;
  return out;
}

at::Tensor kl_shaped_rewards(const at::Tensor& scores, const at::Tensor& kl, const at::Tensor& mask,
                             double kl_coef) {
  at::Tensor m = mask.to(at::kFloat);
  at::Tensor r = -kl_coef * kl.to(at::kFloat) * m;
  r.scatter_add_(1, last_response_position(m).unsqueeze(1), scores.to(at::kFloat).unsqueeze(1) * m.amax(1, true));
  return r;
}

at::Tensor last_response_position(const at::Tensor& mask) {
  // The row's prompt comes first, so the response's last token is the largest
  // masked position, not the count of masked ones.
  const int64_t T = mask.size(1);
  at::Tensor pos = at::arange(T, mask.options().dtype(at::kLong)).unsqueeze(0).expand({mask.size(0), T});
  return (pos * (mask > 0).to(at::kLong)).amax(1);
}

at::Tensor rloo_advantages(const at::Tensor& scores, int64_t group) {
  HPCRL_CHECK(scores.dim() == 1 && group > 1 && scores.size(0) % group == 0,
              "scores " << scores.sizes() << " must be [N*G] with G=" << group << " ≥ 2");
  at::Tensor s = scores.to(at::kFloat).view({-1, group});
  at::Tensor others_mean = (s.sum(1, /*keepdim=*/true) - s) / double(group - 1);
  return (s - others_mean).reshape({-1});
}

at::Tensor group_std(const at::Tensor& scores, int64_t group) {
  at::Tensor s = scores.to(at::kFloat).view({-1, group});
  return s.std(1, /*unbiased=*/true, /*keepdim=*/true).expand({-1, group}).reshape({-1});
}

at::Tensor reverse_cumsum_returns(const at::Tensor& token_rewards, const at::Tensor& mask) {
  at::Tensor r = token_rewards.to(at::kFloat) * mask.to(at::kFloat);
  return r.flip({1}).cumsum(1).flip({1}) * mask.to(at::kFloat);
}

Moments moments_of(const at::Tensor& values, const at::Tensor& mask) {
  at::Tensor m = mask.to(at::kFloat);
  at::Tensor v = values.to(at::kFloat) * m;
  return {m.sum().item<double>(), v.sum().item<double>(), (v * v).sum().item<double>()};
}

double Moments::mean() const { return n > 0 ? sum / n : 0.0; }

double Moments::variance(bool unbiased) const {
  const double d = unbiased ? n - 1 : n;
  return d > 0 ? std::max(0.0, (sum_sq - n * mean() * mean()) / d) : 0.0;
}

}  // namespace hpcrl::algo
