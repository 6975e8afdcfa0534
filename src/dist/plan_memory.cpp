// Per-rank memory estimate of a role for `hpcrl plan`. Parameter counts follow
// how the model shards (docs/model.md, docs/moe.md): attention heads, FFN
// columns and the vocabulary are split over tp (KV heads replicated when tp >
// kv_heads), experts over ep (MoE blocks are replicated over tp), layers over
// pp with the embedding on the first stage and the head (and final norm) on the
// last. Byte counts:
//   weights, grads      parameters × dtype bytes (grads only for trained roles)
//   optimizer           AdamW fp32 moments (8 B/param) + fp32 master copy for
//                       bfloat16 (4 B/param); with zero1 the dense part is
//                       divided over dp·sp and the experts over edp, the groups
//                       their gradients are averaged over (optim/zero1.h)
//   activations         Korthikanti et al. 2022 without attention scores
//                       (memory-efficient SDPA): per layer (10 + 24/tp)·s·C bytes
//                       at 16 bit, s = micro_batch·seq_len/sp tokens, scaled to the
//                       dtype; with activation checkpointing each layer keeps only
//                       its input (s·C values) and one layer is live in full
//   kv_cache            2·layers·kv_heads_per_rank·head_dim·dtype bytes per token,
//                       kv_sequences sequences of seq_len tokens
// seq_len comes from the caller (plan.cpp: the longest sequence a stage allows).
#include <algorithm>

#include "hpcrl/dist/plan.h"

namespace hpcrl::dist {

MemoryEstimate estimate_memory(const ModelArch& a, const config::ModelConfig& role, const Mesh& mesh,
                               config::DType dtype, bool trained, int64_t micro_batch, int64_t seq_len,
                               bool generates, int64_t kv_sequences) {
  const int64_t tp = mesh.tp(), ep = mesh.ep(), pp = mesh.pp();
  const int64_t C = a.hidden_size, D = a.head_dim, H = a.num_heads, K = a.num_kv_heads, V = a.vocab_size;
  const int64_t kv_local = K % tp == 0 ? K / tp : 1;
  int64_t attn = 2 * C * (H / tp) * D + 2 * C * kv_local * D + 2 * C;  // q, o, k, v, two norms
  if (a.attention_bias) attn += (H / tp) * D + 2 * kv_local * D;
  if (a.qk_norm) attn += 2 * D;
  int64_t ffn = 3 * C * a.intermediate_size / tp;
  int64_t experts = 0;  // expert parameters per layer on this rank
  if (a.num_experts > 0) {
    experts = (a.num_experts / ep) * 3 * C * a.moe_intermediate_size;
    ffn = C * a.num_experts + experts;
    if (a.shared_expert_intermediate_size > 0) ffn += 3 * C * a.shared_expert_intermediate_size + C;
  }
  const int64_t per_layer = attn + ffn;

  std::vector<int64_t> layers(pp, a.num_layers / pp);
  if (static_cast<int64_t>(role.parallel.pp_layers.size()) == pp) {
    layers = role.parallel.pp_layers;
  } else {
    for (int64_t s = 0; s < a.num_layers % pp; ++s) ++layers[s];
  }
  const int64_t vocab_shard = V * C / tp;
  int64_t params = 0, stage_layers = 0;
  for (int64_t s = 0; s < pp; ++s) {
    int64_t p = layers[s] * per_layer;
    if (s == 0) p += vocab_shard;  // embedding
    if (s == pp - 1) p += C + ((a.tie_word_embeddings && pp == 1) ? 0 : vocab_shard);  // final norm, head
    if (p > params) {
      params = p;
      stage_layers = layers[s];
    }
  }

  MemoryEstimate e;
  const int64_t bytes = dtype == config::DType::float32 ? 4 : 2;
  e.parameters = params;
  e.seq_len = seq_len;
  e.weights = params * bytes;
  if (trained) {
    e.micro_batch = std::max<int64_t>(micro_batch, 1);
    e.grads = params * bytes;
    const int64_t per_param = 8 + (bytes == 2 ? 4 : 0);
    const int64_t expert_params = stage_layers * experts;
    auto sharded = [&](int64_t n, int64_t shards) { return (n * per_param + shards - 1) / shards; };
    e.optimizer = role.optim.zero1 ? sharded(params - expert_params, int64_t{mesh.dp()} * mesh.sp()) +
                                         sharded(expert_params, mesh.edp())
                                   : params * per_param;
    const int64_t tokens = e.micro_batch * e.seq_len / mesh.sp();
    const int64_t full_layer = tokens * C * (10 * tp + 24) * bytes / (2 * tp);  // (10 + 24/tp)·s·C·bytes/2
    e.activations = role.activation_checkpointing ? stage_layers * tokens * C * bytes + full_layer
                                                  : stage_layers * full_layer;
  }
  if (generates) {
    e.kv_sequences = kv_sequences;
    e.kv_cache = 2 * stage_layers * kv_local * D * bytes * kv_sequences * e.seq_len;
  }
  return e;
}

}  // namespace hpcrl::dist
