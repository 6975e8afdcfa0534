// The one ModelArch builder of the tests, and the tiny random architectures
// shared by the model tests: small enough that a forward+backward takes
// milliseconds, shaped like the real families (GQA, qwen2 QKV bias, qwen3 q/k
// norm, tied and untied heads).
//
// test_arch() spells an architecture field by field at the call, each setter
// named after the ModelArch field it sets (config/model_arch.h); a field no
// setter names keeps ModelArch's default, or the value of the `base` arch:
//   ModelArch a = test_arch().family("qwen2").vocab_size(64).num_layers(8).build();
//   ModelArch deeper = test_arch(tiny_arch()).num_layers(8).build();
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::testing {

class TestArch {
 public:
  explicit TestArch(ModelArch base = {}) : a_(std::move(base)) {}

  TestArch& family(std::string v) { a_.family = std::move(v); return *this; }
  TestArch& vocab_size(int64_t v) { a_.vocab_size = v; return *this; }
  TestArch& hidden_size(int64_t v) { a_.hidden_size = v; return *this; }
  TestArch& intermediate_size(int64_t v) { a_.intermediate_size = v; return *this; }
  TestArch& num_layers(int64_t v) { a_.num_layers = v; return *this; }
  TestArch& num_heads(int64_t v) { a_.num_heads = v; return *this; }
  TestArch& num_kv_heads(int64_t v) { a_.num_kv_heads = v; return *this; }
  TestArch& head_dim(int64_t v) { a_.head_dim = v; return *this; }
  TestArch& max_position_embeddings(int64_t v) { a_.max_position_embeddings = v; return *this; }
  TestArch& rope_theta(double v) { a_.rope_theta = v; return *this; }
  TestArch& rms_norm_eps(double v) { a_.rms_norm_eps = v; return *this; }
  TestArch& tie_word_embeddings(bool v) { a_.tie_word_embeddings = v; return *this; }
  TestArch& attention_bias(bool v) { a_.attention_bias = v; return *this; }
  TestArch& qk_norm(bool v) { a_.qk_norm = v; return *this; }
  // Mixture of experts (num_experts 0: dense).
  TestArch& num_experts(int64_t v) { a_.num_experts = v; return *this; }
  TestArch& experts_per_token(int64_t v) { a_.experts_per_token = v; return *this; }
  TestArch& moe_intermediate_size(int64_t v) { a_.moe_intermediate_size = v; return *this; }
  TestArch& shared_expert_intermediate_size(int64_t v) { a_.shared_expert_intermediate_size = v; return *this; }
  TestArch& norm_topk_prob(bool v) { a_.norm_topk_prob = v; return *this; }
  TestArch& router_aux_loss_coef(double v) { a_.router_aux_loss_coef = v; return *this; }

  ModelArch build() const { return a_; }

 private:
  ModelArch a_;
};

// Starts from ModelArch's defaults, or from `base`.
inline TestArch test_arch(ModelArch base = {}) { return TestArch(std::move(base)); }

// family: "llama" | "qwen2" | "qwen3". 8 query heads / 2 KV heads, so tp=2
// splits KV heads and tp=4 replicates them.
inline ModelArch tiny_arch(const std::string& family = "qwen2", bool tied = true) {
  return test_arch()
      .family(family)
      .vocab_size(64)
      .hidden_size(32)
      .intermediate_size(48)
      .num_layers(2)
      .num_heads(8)
      .num_kv_heads(2)
      .head_dim(8)
      .max_position_embeddings(128)
      .rope_theta(10000.0)
      .rms_norm_eps(1e-6)
      .tie_word_embeddings(tied)
      .attention_bias(family == "qwen2")
      .qk_norm(family == "qwen3")
      .build();
}

// A qwen2_moe-shaped model: 4 experts, top-2, un-normalised weights, shared expert.
inline ModelArch tiny_moe_arch() {
  return test_arch(tiny_arch("qwen2_moe", /*tied=*/false))
      .attention_bias(true)
      .num_experts(4)
      .experts_per_token(2)
      .moe_intermediate_size(16)
      .shared_expert_intermediate_size(24)
      .norm_topk_prob(false)
      .router_aux_loss_coef(0.01)
      .build();
}

// Positions of a left-padded batch: 0 at the first real token (HF: cumsum(mask) - 1, clamped).
inline at::Tensor positions_from_mask(const at::Tensor& mask) {
  return (mask.to(at::kLong).cumsum(1) - 1).clamp_min(0);
}

}  // namespace hpcrl::testing
