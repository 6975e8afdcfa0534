// Work–depth formulas of a decoder forward (work_depth.h).
#include "hpcrl/cost/work_depth.h"

#include <algorithm>

namespace hpcrl::cost {

int64_t attention_width(const ModelArch& a) { return a.num_heads * a.head_dim; }

int64_t attention_projection_params(const ModelArch& a) {
  const int64_t d = a.hidden_size, q = a.num_heads * a.head_dim, kv = a.num_kv_heads * a.head_dim;
  int64_t p = d * q + 2 * d * kv + q * d;  // q, k, v in; o out
  if (a.attention_bias) p += q + 2 * kv;
  return p;
}

int64_t active_mlp_params(const ModelArch& a) {
  const int64_t d = a.hidden_size;
  if (a.num_experts == 0) return 3 * d * a.intermediate_size;  // gate, up, down
  int64_t p = d * a.num_experts + a.experts_per_token * 3 * d * a.moe_intermediate_size;  // router + top-k
  if (a.shared_expert_intermediate_size > 0) p += 3 * d * a.shared_expert_intermediate_size + d;
  return p;
}

double forward_flops_per_token(const ModelArch& a, double context, bool lm_head) {
  const double per_layer = double(attention_projection_params(a) + active_mlp_params(a)) +
                           context * double(attention_width(a));
  const double head = lm_head ? double(a.vocab_size) * double(a.hidden_size) : 0.0;
  return 2.0 * double(a.num_layers) * per_layer + 2.0 * head;
}

double sequence_forward_flops(const ModelArch& a, int64_t tokens, bool lm_head_every_token) {
  if (tokens <= 0) return 0;
  const double mean_context = (double(tokens) + 1.0) / 2.0;
  double f = double(tokens) * forward_flops_per_token(a, mean_context, lm_head_every_token);
  if (!lm_head_every_token) f += 2.0 * double(a.vocab_size) * double(a.hidden_size);  // the last token's logits
  return f;
}

double decode_step_flops(const ModelArch& a, int64_t batch, double context) {
  return double(batch) * forward_flops_per_token(a, context + 1.0);  // the new token attends to itself too
}

double kv_cache_bytes(const ModelArch& a, int64_t tokens, int bytes_per_value) {
  return 2.0 * double(tokens) * double(a.num_layers) * double(a.num_kv_heads * a.head_dim) * bytes_per_value;
}

double weight_bytes(const ModelArch& a, int bytes_per_value) { return double(a.num_parameters()) * bytes_per_value; }

double training_flops(const ModelArch& a, int64_t tokens, int64_t sequence, bool activation_checkpointing) {
  if (tokens <= 0) return 0;
  const int64_t seq = std::max<int64_t>(1, std::min(sequence, tokens));
  const double per_token = forward_flops_per_token(a, (double(seq) + 1.0) / 2.0);
  return (activation_checkpointing ? 4.0 : 3.0) * double(tokens) * per_token;
}

}  // namespace hpcrl::cost
