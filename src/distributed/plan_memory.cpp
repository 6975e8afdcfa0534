// Per-rank memory estimate of a role for `hpcrl plan`. Parameter counts follow
// how the model shards (docs/model.md, docs/moe.md): attention heads, FFN
// columns and the vocabulary are split over tp (KV heads replicated when tp >
// kv_heads), experts over ep (MoE blocks are replicated over tp), layers over
// pp with the embedding on the first stage and the head (and final norm) on the
// last. Byte counts:
//   weights, grads      parameters × dtype bytes (grads only for trained roles);
//                       with zero: 2 or 3 the gradients are sharded as the optimizer
//                       state is
//   grad_buffers        the reduction's flat buffers (MemoryEstimate::transient
//                       says which are held beside the activations): plain dp over more than
//                       one rank concatenates every bucket's gradients for its
//                       all-reduce (optim/grad_sync.cpp) and ZeRO-1 flattens
//                       them for its reduce-scatter, a second full copy each
//                       (ZeRO-1 with the 1/W shard it reduces into beside it);
//                       ZeRO-2 holds only the bucket being filled
//                       (its flat buffer and the incoming gradient, 2 × bucket_mb) or
//                       the vocabulary shard, a bucket of its own whose gradient
//                       is its flat buffer, with its reduced 1/W part — whichever
//                       is larger — and kZero2BucketsInFlight buckets being
//                       reduced (flat buffer and 1/W part each;
//                       optim/grad_reduce_scatter.h)
//   lora                with `lora`, the adapter factors of the targeted
//                       projections (A [r, in] and B [out, r], cut over tp as
//                       their layer is: parallel/tensor/lora.h) join the weights,
//                       and grads, grad_buffers and the optimizer count only them:
//                       the base is frozen
//   zero 3              the weights are the 1/W shard (dense over dp·sp,
//                       experts over edp; LoRA's frozen base too);
//                       param_gathers: the outer unit (embedding, final norm,
//                       head) and two layers gathered at once in a forward or
//                       backward (one computing, the next prefetched), three
//                       with LoRA (a frozen layer goes when the backward
//                       reaches the one below); whole_gathers: the rest of
//                       the model, which an engine reading the weights in
//                       place (GPU, bf16) and MoE models' copies gather
//                       (outside the training passes, so it replaces their
//                       transients); 0 otherwise: the CPU float32 engine
//                       packs, loading, weight syncs and checkpoints walk
//                       the units one at a time;
//                       gradients as with zero 2, one bucket per layer
//                       (optim/sharded_parameters.h, algo/training/zero3_units.h), held
//                       as zero3_gradient_buckets says
//   optimizer           AdamW fp32 moments (8 B/param) + fp32 master copy for
//                       bfloat16 (4 B/param); with zero 1, 2 or 3 the dense part is
//                       divided over dp·sp and the experts over edp, the groups
//                       their gradients are averaged over (optim/sharded_adamw.h)
//   activations         what hpcrl's layer saves for its backward, per token
//                       (layer_activation_bytes_per_token below), times
//                       s = micro_batch·seq_len/sp tokens and the stage's layers;
//                       with activation checkpointing each layer keeps only
//                       its input (s·C values) and one layer is live in full. Both
//                       are reported (activations_full, activations_checkpointed);
//                       `activations` is the one the role is configured for.
//                       Korthikanti et al. 2022's 34·s·C bytes a layer (16 bit,
//                       no scores) assumes a 4C non-gated MLP and counts less:
//                       base-100m's layer keeps 25 s·C fp32 values, not 17
//   logits              s·V/tp values in the dtype (the LM head's output) plus three
//                       fp32 tensors of that shape the vocab-parallel log-prob holds
//                       at once (shifted logits, their exponentials, the log-probs it
//                       saves for the backward; parallel/tensor/vocab_logprobs.cpp)
//   kv_cache            2·layers·kv_heads_per_rank·head_dim·dtype bytes per token,
//                       kv_sequences sequences of seq_len tokens (the engine's slots
//                       are allocated at that size up front: rollout/kv_slots.cpp)
//   engine_weights      a float32 CPU engine's packed copy of every layer's q/k/v
//                       (with biases), o, gate/up and down matrices and the LM
//                       head (the embedding when tied), 4 B each, which it keeps
//                       from one generation call to the next
//                       (rollout/slot_projections.h); resident, and counted even
//                       when the engine shares the trainer's own weights
// seq_len comes from the caller (plan.cpp: the longest sequence a stage allows).
#include <algorithm>

#include "hpcrl/distributed/plan.h"
#include "hpcrl/distributed/plan_constants.h"

namespace hpcrl::dist {

int64_t lora_parameters_per_layer(const ModelArch& a, const config::LoraConfig& lora, int64_t tp) {
  if (!lora.enabled()) return 0;
  const int64_t r = lora.rank, C = a.hidden_size, D = a.head_dim;
  const int64_t q_out = a.num_heads / tp * D, kv_out = (a.num_kv_heads % tp == 0 ? a.num_kv_heads / tp : 1) * D;
  const int64_t ffn = a.intermediate_size / tp;
  int64_t n = 0;
  for (const auto& t : lora.targets) {
    // Column layers: A [r, in] whole, B [out/tp, r]. Row layers: A [r, in/tp], B [out, r] whole.
    if (t == "q_proj") n += r * C + q_out * r;
    if (t == "k_proj" || t == "v_proj") n += r * C + kv_out * r;
    if (t == "o_proj") n += r * q_out + C * r;
    if (t == "gate_proj" || t == "up_proj") n += r * C + ffn * r;
    if (t == "down_proj") n += r * ffn + C * r;
  }
  return n;
}

// Bytes one decoder layer keeps for its backward per token of the micro-batch
// (b: the dtype's bytes), from the tensors its ops save (model/decoder_layer.cpp,
// rms_norm.cpp, rope.cpp, attention.cpp, attention_kernel.cpp, mlp.cpp):
//   each RMSNorm     its input in fp32 (the input itself in fp32, a copy in bf16),
//                    the normalised values and the weighted output: C·(4 + 2b)
//   q, k             the projection's output and its rotated half-swap (RoPE),
//                    2b per value; with qk_norm also that norm's 4 + b
//   attention core   1.13's explicit path (kAttentionSavesScores): the grouped q
//                    and the transposed k and v copied for the matmuls (b each)
//                    and the fp32 softmax output, H·seq_len values a token (its
//                    bf16 copy beside it in bf16); SDPA: the rotated q, k, v and
//                    its output (b each), with KV heads repeated before LibTorch 2.5
//   o_proj           its input, the heads' output made contiguous: q·b
//   MLP              gate, silu(gate), up and their product: 4·F·b (MoE: each of
//                    the top-k experts' for its copy of the token, the shared
//                    expert's, and the router's fp32 logits and probabilities)
// Measured at base-100m (fp32, micro-batches of 2 rows of 256 tokens): 38.9 MiB
// a layer (docs/zero.md); this gives 39.0.
int64_t layer_activation_bytes_per_token(const ModelArch& a, int64_t tp, int64_t seq_len, int64_t b) {
  const int64_t C = a.hidden_size, D = a.head_dim, heads = a.num_heads / tp;
  const int64_t q = heads * D, kv = (a.num_kv_heads % tp == 0 ? a.num_kv_heads / tp : 1) * D;
  int64_t n = 2 * C * (4 + 2 * b);                     // two RMSNorms
  n += (q + kv) * 2 * b;                               // RoPE's input and rotated copy
  if (a.qk_norm) n += (q + kv) * (4 + b);              // the per-head norm before RoPE
  if (kAttentionSavesScores) {
    n += (q + 2 * kv) * b + heads * seq_len * (4 + (b == 2 ? 2 : 0));
  } else {
    const int64_t kv_used = kAttentionRepeatsKvHeads ? q : kv;
    n += (2 * q + 2 * kv_used) * b;
  }
  n += q * b;  // o_proj's input
  if (a.num_experts == 0) return n + 4 * (a.intermediate_size / tp) * b;
  n += a.experts_per_token * (4 * a.moe_intermediate_size * b + C * b) + 2 * a.num_experts * 4;
  if (a.shared_expert_intermediate_size > 0) n += 4 * a.shared_expert_intermediate_size * b;
  return n;
}

// ZeRO-3's gradient buckets at their peak beside the activations (bytes; one
// micro-batch's backward through a stage of `layers` layers of `layer` bytes).
// The outer unit's bucket opens with the final norm's gradient, the first of
// the backward, and closes with the embedding's, the last: it is held through
// the whole backward. A layer's bucket fills while the backward frees that
// layer's activations (`freed_per_layer`), and up to kZero2BucketsInFlight
// layers are being reduced, each with the 1/W part it receives. After k layers:
// k + 1 layer buckets held and k layers' activations freed, so the peak is at
// the first layer when a layer's activations outweigh its bucket (docs/zero.md:
// at dp 2 the plan's ZeRO-3 totals are within 6 % of the allocated peaks of
// base-100m and large-500m with this, where counting every bucket in flight at
// the first layer put ZeRO-3's saving at 500 M 17 % short).
int64_t zero3_gradient_buckets(int64_t layer, int64_t outer, int64_t freed_per_layer, int64_t group,
                               int64_t layers) {
  int64_t in_flight = 0;
  for (int64_t k = 0; k <= std::min<int64_t>(kZero2BucketsInFlight, layers - 1); ++k)
    in_flight = std::max(in_flight, layer * (1 + k) + layer / group * k - freed_per_layer * k);
  return outer + in_flight;
}

namespace {

// The parameters of the role's largest pipeline stage on one rank.
struct StageParameters {
  int64_t attn = 0;          // one layer's attention block (projections, biases, norms)
  int64_t ffn = 0;           // one layer's MLP or MoE block
  int64_t experts = 0;       // expert parameters per layer on this rank
  int64_t per_layer = 0;     // attn + ffn
  int64_t vocab_shard = 0;   // the embedding's (or the head's) V·C/tp
  int64_t params = 0;        // the largest stage's parameters
  int64_t stage_layers = 0;  // its layers
  int64_t kv_local = 0;      // KV heads on this rank
};

StageParameters stage_parameters(const ModelArch& a, const config::ModelConfig& role, const Mesh& mesh) {
  StageParameters sp;
  const int64_t tp = mesh.tp(), ep = mesh.ep(), pp = mesh.pp();
  const int64_t C = a.hidden_size, D = a.head_dim, H = a.num_heads, K = a.num_kv_heads, V = a.vocab_size;
  sp.kv_local = K % tp == 0 ? K / tp : 1;
  sp.attn = 2 * C * (H / tp) * D + 2 * C * sp.kv_local * D + 2 * C;  // q, o, k, v, two norms
  if (a.attention_bias) sp.attn += (H / tp) * D + 2 * sp.kv_local * D;
  if (a.qk_norm) sp.attn += 2 * D;
  sp.ffn = 3 * C * a.intermediate_size / tp;
  if (a.num_experts > 0) {
    sp.experts = (a.num_experts / ep) * 3 * C * a.moe_intermediate_size;
    sp.ffn = C * a.num_experts + sp.experts;
    if (a.shared_expert_intermediate_size > 0) sp.ffn += 3 * C * a.shared_expert_intermediate_size + C;
  }
  sp.per_layer = sp.attn + sp.ffn;

  std::vector<int64_t> layers(pp, a.num_layers / pp);
  if (static_cast<int64_t>(role.parallel.pp_layers.size()) == pp) {
    layers = role.parallel.pp_layers;
  } else {
    for (int64_t s = 0; s < a.num_layers % pp; ++s) ++layers[s];
  }
  sp.vocab_shard = V * C / tp;
  for (int64_t s = 0; s < pp; ++s) {
    int64_t p = layers[s] * sp.per_layer;
    if (s == 0) p += sp.vocab_shard;  // embedding
    if (s == pp - 1) p += C + ((a.tie_word_embeddings && pp == 1) ? 0 : sp.vocab_shard);  // final norm, head
    if (p > sp.params) {
      sp.params = p;
      sp.stage_layers = layers[s];
    }
  }
  return sp;
}

// What a trained role's stage holds for its update, in bytes: `trained` parameters, of which
// `trained_experts` are experts and `trained_largest` the largest single one (the vocabulary shard).
struct TrainedShare {
  int64_t trained = 0, trained_experts = 0, trained_largest = 0;
  int64_t bytes = 0;        // the dtype's
  int64_t tokens = 0;       // one micro-batch's on this rank
  int64_t full_layer = 0;   // one layer's activations for those tokens
  int64_t dense_group = 0;  // dp·sp: the ranks dense gradients are averaged over
};

// n parameters of b bytes each over `shards` ranks.
int64_t sharded(int64_t n, int64_t b, int64_t shards) { return (n * b + shards - 1) / shards; }

// ZeRO-3: the weights become this rank's shard, the gradient buckets are units, and the gathers are counted.
void add_zero3(MemoryEstimate& e, const ModelArch& a, const config::ModelConfig& role, const Mesh& mesh,
               const RoleWork& work, const StageParameters& sp, const TrainedShare& t) {
  const int64_t bytes = t.bytes, params = sp.params, stage_layers = sp.stage_layers, experts = sp.experts;
  // Buckets are units: the outer unit's and a layer's.
  const int64_t layer = sp.per_layer * bytes, outer = (params - stage_layers * sp.per_layer) * bytes;
  const int64_t freed_per_layer = role.activation_checkpointing ? t.tokens * a.hidden_size * bytes : t.full_layer;
  e.grad_buffers = std::min(t.trained * bytes,
                            zero3_gradient_buckets(layer, outer, freed_per_layer, t.dense_group, stage_layers));
  const int64_t shard = sharded(params - stage_layers * experts, bytes, t.dense_group) +
                        sharded(stage_layers * experts, bytes, mesh.edp());
  // LoRA's frozen base goes only when the backward reaches the layer below: one layer more.
  e.param_gathers = outer + std::min<int64_t>(role.lora.enabled() ? 3 : 2, stage_layers) * layer;
  if (a.num_experts > 0 || work.generates_in_place) e.whole_gathers = params * bytes - shard;
  e.weights = shard;
}

// Gradients, their reduction's buffers, the optimizer state and the activations of a trained role.
void add_training(MemoryEstimate& e, const ModelArch& a, const config::ModelConfig& role, const Mesh& mesh,
                  const RoleWork& work, const StageParameters& sp, const TrainedShare& t) {
  const int64_t bytes = t.bytes, trained = t.trained, trained_experts = t.trained_experts;
  const int64_t per_param = 8 + (bytes == 2 ? 4 : 0);
  const int64_t dense_group = t.dense_group;
  e.grads = trained * bytes;
  if (role.optim.zero >= 2) {
    const int64_t bucket = role.optim.bucket_bytes(), largest = t.trained_largest * bytes;
    e.grads = sharded(trained - trained_experts, bytes, dense_group) + sharded(trained_experts, bytes, mesh.edp());
    e.grad_buffers = std::min(trained * bytes, std::max(2 * bucket, largest + largest / dense_group) +
                                                   kZero2BucketsInFlight * (bucket + bucket / dense_group));
    if (role.optim.zero == 3) add_zero3(e, a, role, mesh, work, sp, t);
  } else if (role.optim.zero == 1) {  // the flat copy, and the shard it is reduced into beside it
    e.grad_buffers = trained * bytes + sharded(trained - trained_experts, bytes, dense_group) +
                     sharded(trained_experts, bytes, mesh.edp());
    e.buffers_replace_activations = true;
  } else if (dense_group > 1) {
    e.grad_buffers = trained * bytes;  // the gradients flattened for the all-reduce: a second full copy
    e.buffers_replace_activations = true;
  }
  e.optimizer = role.optim.zero >= 1 ? sharded(trained - trained_experts, per_param, dense_group) +
                                           sharded(trained_experts, per_param, mesh.edp())
                                     : trained * per_param;
  e.activations_full = sp.stage_layers * t.full_layer;
  e.activations_checkpointed = sp.stage_layers * t.tokens * a.hidden_size * bytes + t.full_layer;
  e.activations = role.activation_checkpointing ? e.activations_checkpointed : e.activations_full;
}

// A rollout engine's packed weights (float32 CPU engines) and KV cache.
void add_generation(MemoryEstimate& e, const ModelArch& a, const RoleWork& work, const StageParameters& sp,
                    int64_t bytes) {
  if (work.generates && work.packs_weights) {
    // The norms stay in the model.
    const int64_t projections = sp.attn - 2 * a.hidden_size - (a.qk_norm ? 2 * a.head_dim : 0);
    const int64_t dense_ffn = a.num_experts > 0 ? 0 : sp.ffn;  // MoE blocks keep their own weights
    e.engine_weights = (sp.stage_layers * (projections + dense_ffn) + sp.vocab_shard) * 4;
  }
  if (work.generates) {
    e.kv_sequences = work.kv_sequences;
    e.kv_cache = 2 * sp.stage_layers * sp.kv_local * a.head_dim * bytes * work.kv_sequences * e.seq_len;
  }
}

}  // namespace

MemoryEstimate estimate_memory(const ModelArch& a, const config::ModelConfig& role, const Mesh& mesh,
                               config::DType dtype, const RoleWork& work) {
  const int64_t tp = mesh.tp();
  const StageParameters sp = stage_parameters(a, role, mesh);

  // Trained parameters: all of them, or only the adapters (their layers' experts are never adapted).
  const int64_t adapters = sp.stage_layers * lora_parameters_per_layer(a, role.lora, tp);
  TrainedShare t;
  t.trained = role.lora.enabled() ? adapters : sp.params;
  t.trained_experts = role.lora.enabled() ? 0 : sp.stage_layers * sp.experts;
  t.trained_largest = role.lora.enabled() ? 0 : sp.vocab_shard;

  MemoryEstimate e;
  t.bytes = dtype == config::DType::float32 ? 4 : 2;
  e.parameters = sp.params + adapters;
  e.seq_len = work.seq_len;
  e.weights = e.parameters * t.bytes;
  if (work.trained || work.logprobs) e.micro_batch = std::max<int64_t>(work.micro_batch, 1);
  t.tokens = e.micro_batch * e.seq_len / mesh.sp();
  if (work.logprobs) e.logits = t.tokens * (a.vocab_size / tp) * (t.bytes + 3 * 4);
  if (work.trained) {
    t.full_layer = t.tokens * layer_activation_bytes_per_token(a, tp, e.seq_len, t.bytes);
    t.dense_group = int64_t{mesh.dp()} * mesh.sp();
    add_training(e, a, role, mesh, work, sp, t);
  }
  add_generation(e, a, work, sp, t.bytes);
  return e;
}

std::vector<RankMemory> rank_memory(const Plan& plan) {
  std::vector<RankMemory> per_rank(plan.world);
  for (int r = 0; r < plan.world; ++r) per_rank[r].ranks = {r};
  for (const auto& rp : plan.roles) {
    if (!rp.memory) continue;
    const MemoryEstimate& e = *rp.memory;
    for (int r = rp.mesh.first_rank(); r <= rp.mesh.last_rank(); ++r) {
      RankMemory& m = per_rank[r];
      m.roles.push_back(rp.name);
      m.resident += rp.shares_weights_with_trainer ? e.engine_weights : e.resident();
      if (e.transient() > m.transient) m.transient = e.transient(), m.transient_role = rp.name;
    }
  }
  std::vector<RankMemory> grouped;  // consecutive ranks with the same roles and numbers share a row
  for (const RankMemory& m : per_rank) {
    if (m.roles.empty()) continue;
    RankMemory* last = grouped.empty() ? nullptr : &grouped.back();
    if (last && last->roles == m.roles && last->resident == m.resident && last->transient == m.transient &&
        last->transient_role == m.transient_role) {
      last->ranks.push_back(m.ranks.front());
    } else {
      grouped.push_back(m);
    }
  }
  return grouped;
}

}  // namespace hpcrl::dist
