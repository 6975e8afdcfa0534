// GRPO group advantages, GAE and KL-shaped rewards (see advantages.h).
#include "hpcrl/algo/advantages.h"

#include "hpcrl/algo/loss_agg.h"
#include "hpcrl/util/check.h"

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
  at::Tensor last = at::zeros({r.size(0)}, r.options());
  for (int64_t t = T - 1; t >= 0; --t) {
    at::Tensor next_v = t + 1 < T ? v.select(1, t + 1) : at::zeros_like(last);
    at::Tensor delta = r.select(1, t) + gamma * next_v - v.select(1, t);
    // Padding after the response resets the recursion (next value 0, next advantage 0).
    last = (delta + gamma * lam * last) * m.select(1, t);
    adv.select(1, t).copy_(last);
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
  at::Tensor last = (m.sum(1) - 1).clamp_min(0).to(at::kLong);  // index of the last response token
  r.scatter_add_(1, last.unsqueeze(1), scores.to(at::kFloat).unsqueeze(1));
  return r;
}

}  // namespace hpcrl::algo
