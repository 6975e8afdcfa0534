// Token sampling (see sampling.h).
#include "hpcrl/rollout/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

namespace hpcrl::rollout {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

at::Generator sample_generator(uint64_t seed, int64_t prompt, int64_t index) {
  uint64_t s = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(prompt)) ^ static_cast<uint64_t>(index));
  return at::make_generator<at::CPUGeneratorImpl>(s);
}

int64_t sample_token(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen) {
  if (temperature <= 0.0) return logits.argmax().item<int64_t>();
  at::Tensor l = logits.to(at::kFloat).cpu() / temperature;  // [V]
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (top_k > 0 && top_k < l.size(0)) {
    at::Tensor kth = std::get<0>(l.topk(top_k)).min();
    l = l.masked_fill(l < kth, neg_inf);
  }
  if (top_p < 1.0) {
    auto [sorted, order] = l.sort(/*dim=*/0, /*descending=*/true);
    at::Tensor probs = sorted.softmax(0);
    at::Tensor cum = probs.cumsum(0);
    // Drop a token when the tokens before it already reach top_p (the first always stays).
    at::Tensor drop = (cum - probs) >= top_p;
    l = l.index_fill(0, order.masked_select(drop), neg_inf);
  }
  at::Tensor probs = l.softmax(0);
  return at::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
}

}  // namespace hpcrl::rollout
