// Batched token choice (see sampling.h).
#include "hpcrl/rollout/sampling.h"

#include <cmath>
#include <limits>

#include "hpcrl/rollout/philox.h"

namespace hpcrl::rollout {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// `scaled` [R, V] with -inf where top-k, top-p or min-p drop a token. top-p
// applies to the top-k-renormalised distribution; min-p compares with the most
// likely token, which every filter keeps, so its order does not matter.
at::Tensor filtered(at::Tensor scaled, const TokenFilter& f) {
  const int64_t V = scaled.size(-1);
  if (f.top_k > 0 && f.top_k < V) {
    at::Tensor kth = std::get<0>(scaled.topk(f.top_k, -1)).narrow(-1, f.top_k - 1, 1);  // [R, 1]
    scaled = scaled.masked_fill(scaled < kth, kNegInf);
  }
  if (f.top_p < 1.0) {
    auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
    at::Tensor probs = sorted.softmax(-1);
    // Drop a token when the tokens before it already reach top_p (the first always stays).
    at::Tensor drop_sorted = (probs.cumsum(-1) - probs) >= f.top_p;
    scaled = scaled.masked_fill(at::zeros_like(drop_sorted).scatter(-1, order, drop_sorted), kNegInf);
  }
  if (f.min_p > 0.0) {
    at::Tensor top = std::get<0>(scaled.max(-1, /*keepdim=*/true));
    scaled = scaled.masked_fill(scaled - top < std::log(f.min_p), kNegInf);
  }
  return scaled;
}

// Inverse-CDF draws: the first token whose cumulative (unnormalised) mass
// exceeds u · total. Accumulated in float64: a float32 running sum over a
// 150K-token vocabulary would be off by far more than a tail token's mass.
at::Tensor inverse_cdf(const at::Tensor& kept, const at::Tensor& uniforms) {
  at::Tensor top = std::get<0>(kept.max(-1, /*keepdim=*/true));
  at::Tensor cdf = (kept - top).exp().cumsum(-1, at::kDouble);  // [R, V]
  at::Tensor target = uniforms.to(cdf.device(), at::kDouble).unsqueeze(-1) * cdf.narrow(-1, cdf.size(-1) - 1, 1);
  return at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(-1).clamp_max(cdf.size(-1) - 1);
}
}  // namespace

at::Tensor draw_uniforms(uint64_t seed, const std::vector<DrawKey>& keys) {
  at::Tensor u = at::empty({int64_t(keys.size())}, at::kDouble);
  double* out = u.data_ptr<double>();
  for (size_t r = 0; r < keys.size(); ++r) out[r] = draw_uniform(seed, keys[r].prompt, keys[r].sample, keys[r].step);
  return u;
}

ChosenTokens choose_tokens(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                           bool tempered_logprobs) {
  const at::Tensor raw = logits.to(at::kFloat);  // [R, V]
  const bool greedy = filter.temperature <= 0;
  const at::Tensor scaled = greedy || filter.temperature == 1.0 ? raw : raw / filter.temperature;
  ChosenTokens out;
  out.ids = greedy ? raw.argmax(-1) : inverse_cdf(filtered(scaled, filter), uniforms);
  const at::Tensor& dist = tempered_logprobs && !greedy ? scaled : raw;
  out.logprobs = dist.gather(-1, out.ids.unsqueeze(-1)).squeeze(-1) - at::logsumexp(dist, -1);
  return out;
}

}  // namespace hpcrl::rollout
