// Tiny random architectures shared by the model tests: small enough that a
// forward+backward takes milliseconds, shaped like the real families
// (GQA, qwen2 QKV bias, qwen3 q/k norm, tied and untied heads).
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::testing {

// family: "llama" | "qwen2" | "qwen3". 8 query heads / 2 KV heads, so tp=2
// splits KV heads and tp=4 replicates them.
inline ModelArch tiny_arch(const std::string& family = "qwen2", bool tied = true) {
  ModelArch a;
  a.family = family;
  a.vocab_size = 64;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_layers = 2;
  a.num_heads = 8;
  a.num_kv_heads = 2;
  a.head_dim = 8;
  a.max_position_embeddings = 128;
  a.rope_theta = 10000.0;
  a.rms_norm_eps = 1e-6;
  a.tie_word_embeddings = tied;
  a.attention_bias = family == "qwen2";
  a.qk_norm = family == "qwen3";
  return a;
}

// A qwen2_moe-shaped model: 4 experts, top-2, un-normalised weights, shared expert.
inline ModelArch tiny_moe_arch() {
  ModelArch a = tiny_arch("qwen2_moe", false);
  a.attention_bias = true;
  a.num_experts = 4;
  a.experts_per_token = 2;
  a.moe_intermediate_size = 16;
  a.shared_expert_intermediate_size = 24;
  a.norm_topk_prob = false;
  a.router_aux_loss_coef = 0.01;
  return a;
}

// Positions of a left-padded batch: 0 at the first real token (HF: cumsum(mask) - 1, clamped).
inline at::Tensor positions_from_mask(const at::Tensor& mask) {
  return (mask.to(at::kLong).cumsum(1) - 1).clamp_min(0);
}

}  // namespace hpcrl::testing
