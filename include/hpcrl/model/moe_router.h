// Top-k routing of an MoE layer and its load-balancing loss, as pure functions
// of the router logits so they can be tested by hand. Routing follows HF
// Mixtral/Qwen2-MoE: softmax over all experts in float32 (float64 for float64
// logits), then the k largest probabilities; with norm_topk_prob those k are
// rescaled to sum to 1.
#pragma once

#include <ATen/ATen.h>

namespace hpcrl::model {

struct Routing {
  at::Tensor probs;    // [N, E] float32 (float64 for float64 logits): softmax of the logits
  at::Tensor weights;  // [N, k] same dtype: combine weights of the chosen experts
  at::Tensor experts;  // [N, k] int64: chosen experts, by descending probability
};

// logits: [N, E] (any float dtype). 1 <= k <= E.
Routing route_top_k(const at::Tensor& logits, int64_t k, bool normalize);

// Switch/Mixtral load-balancing loss of one layer, unscaled:
//   aux = E · Σ_e f_e · P_e,
//   f_e = (tokens whose top-k contains e) / N   (not differentiable),
//   P_e = mean over tokens of probs[:, e]     (differentiable).
// This is HF's load_balancing_loss_func for a single layer: it equals k when
// routing is perfectly uniform. token_mask [N] (bool or 0/1, optional) leaves
// padding tokens out of both averages. Returns a scalar of probs' dtype (0 for no tokens).
at::Tensor load_balancing_loss(const Routing& routing, int64_t num_experts,
                               const at::Tensor& token_mask = {});

}  // namespace hpcrl::model
