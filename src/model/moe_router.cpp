// Top-k router and load-balancing loss (definitions in the header). The
// softmax runs in (at least) float32 whatever the model dtype, as HF does, so bf16 runs
// pick the same experts as fp32 runs except on near-ties.
#include "hpcrl/model/moe_router.h"

#include "hpcrl/util/check.h"

namespace hpcrl::model {

Routing route_top_k(const at::Tensor& logits, int64_t k, bool normalize) {
  HPCRL_CHECK(logits.dim() == 2, "router logits must be [tokens, experts], got " << logits.sizes());
  HPCRL_CHECK(k >= 1 && k <= logits.size(1),
              "experts_per_token = " << k << " must be in [1, " << logits.size(1) << "]");
  Routing r;
  // float32, or float64 when the logits are (finite-difference tests).
  const at::ScalarType t = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  r.probs = at::softmax(logits.to(t), /*dim=*/1);  // [N, E]
  auto top = at::topk(r.probs, k, /*dim=*/1, /*largest=*/true, /*sorted=*/true);
  r.weights = std::get<0>(top);  // [N, k]
  r.experts = std::get<1>(top);  // [N, k]
  if (normalize) r.weights = r.weights / r.weights.sum(/*dim=*/1, /*keepdim=*/true);
  return r;
}

at::Tensor load_balancing_loss(const Routing& routing, int64_t num_experts, const at::Tensor& token_mask) {
  const int64_t n = routing.probs.size(0);
  // [N, E]: 1 where the token's top-k contains e.
  at::Tensor chosen = at::one_hot(routing.experts, num_experts).sum(/*dim=*/1).to(at::kFloat);
  at::Tensor probs = routing.probs;
  at::Tensor count;
  if (token_mask.defined()) {
    HPCRL_CHECK(token_mask.dim() == 1 && token_mask.size(0) == n,
                "token_mask must be [" << n << "], got " << token_mask.sizes());
    at::Tensor m = token_mask.to(probs.device(), at::kFloat).unsqueeze(1);  // [N, 1]
    chosen = chosen * m;
    probs = probs * m;
    count = m.sum();
  } else {
    count = at::full({}, static_cast<double>(n), probs.options());
  }
  count = count.clamp_min(1.0);  // no tokens: both sums are 0, and so is the loss
  at::Tensor f = chosen.sum(/*dim=*/0) / count;  // [E]
  at::Tensor p = probs.sum(/*dim=*/0) / count;   // [E]
  return static_cast<double>(num_experts) * (f * p).sum();
}

}  // namespace hpcrl::model
