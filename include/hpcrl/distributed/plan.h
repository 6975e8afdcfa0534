// The rank map of a pipeline for `hpcrl plan`: for every model role (and every
// rollout engine that generates) its mesh on its placement range, each rank's
// node and local device, every group's members, warnings (tp/sp groups that
// cross nodes), and a per-rank memory estimate when the architecture is known.
// Pure computation: no MPI, no launcher. JSON shape: docs/communication.md (`hpcrl plan`).
#pragma once

#include <algorithm>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/mesh.h"

namespace hpcrl::dist {

// Bytes on the busiest rank of a role (the pp stage holding the most parameters),
// one field per component (plan_memory.cpp has each formula). Resident state stays
// allocated for the whole run; the transient components exist only while the role
// computes (training, log-probs, generation), so roles sharing a rank take turns
// with them (rank_memory below).
struct MemoryEstimate {
  int64_t parameters = 0;    // parameters held by that rank
  // Resident.
  int64_t weights = 0;       // with zero 3: this rank's 1/dp shard of the trained parameters
  int64_t grads = 0;         // trained roles only; with zero 2 or 3 the 1/dp shard
  int64_t optimizer = 0;     // AdamW: fp32 moments (+ fp32 master for bf16), / dp with zero 1, 2 or 3
  int64_t engine_weights = 0;  // a float32 CPU engine's packed copy of its projections and LM head
  // Transient.
  int64_t activations = 0;   // trained roles: one micro-batch of seq_len-token sequences, as configured
  int64_t activations_full = 0, activations_checkpointed = 0;  // the same without / with activation checkpointing
  int64_t logits = 0;        // roles scored by log-probs: one micro-batch's logits at their peak
  int64_t kv_cache = 0;      // rollout engines: max_batch sequences at seq_len
  int64_t grad_buffers = 0;  // trained roles: the gradient reduction's flat buffers while it runs
  int64_t param_gathers = 0;  // zero 3: units gathered in a forward/backward (outer unit and two layers)
  int64_t whole_gathers = 0;  // zero 3: the rest of the model, gathered by generation, weight syncs, checkpoints
  int64_t seq_len = 0, micro_batch = 0, kv_sequences = 0;  // the assumptions behind the transient ones
  int64_t resident() const { return weights + grads + optimizer + engine_weights; }
  // Plain dp's and ZeRO-1's flat copies of the whole gradient fill during the
  // backward as it frees the activations, so the two are not held at once; ZeRO-2/3's
  // few buckets in flight are, from the first layers of the backward on (measured:
  // docs/zero.md, "Peak memory against hpcrl plan").
  bool buffers_replace_activations = false;
  // A ZeRO-3 role holds its gathered units through forward and backward and its
  // whole model only outside them.
  int64_t transient() const {
    const int64_t training = buffers_replace_activations ? std::max(activations + logits, grad_buffers)
                                                         : activations + logits + grad_buffers;
    return std::max(training + kv_cache + param_gathers, whole_gathers);
  }
  int64_t total() const { return resident() + transient(); }
};

// What a role does on its ranks, which decides its memory components.
struct RoleWork {
  bool trained = false;    // grads, optimizer state, activations
  bool logprobs = false;   // computes log-probs over the vocabulary (not a value-head critic, not an engine)
  bool generates = false;  // a rollout engine: KV cache for kv_sequences sequences
  bool packs_weights = false;  // that engine decodes float32 on the CPU: it keeps a packed copy of its weights
  // A trained role whose engine reads the model's weights in place (on a GPU or
  // in bf16): under ZeRO-3 generation gathers the whole model.
  bool generates_in_place = false;
  int64_t micro_batch = 1, seq_len = 0, kv_sequences = 0;
};

// Parameters of the LoRA factors in one layer on one tp rank (0 without lora).
int64_t lora_parameters_per_layer(const ModelArch& arch, const config::LoraConfig& lora, int64_t tp);
// Bytes a decoder layer saves for its backward per token of a micro-batch whose
// sequences are seq_len long, at `dtype_bytes` per value (plan_memory.cpp lists them).
int64_t layer_activation_bytes_per_token(const ModelArch& arch, int64_t tp, int64_t seq_len, int64_t dtype_bytes);
// ZeRO-3's gradient buckets held at their peak during a backward (plan_memory.cpp).
int64_t zero3_gradient_buckets(int64_t layer, int64_t outer, int64_t freed_per_layer, int64_t group, int64_t layers);

struct RolePlan {
  std::string name;          // "policy" or "policy.rollout"
  Mesh mesh;
  std::optional<MemoryEstimate> memory;
  bool shares_weights_with_trainer = false;  // an engine that generates with its role's own weights (same layout)
};

// The peak bytes of a set of ranks that hold the same roles: every role's resident
// state plus the largest transient one (colocated roles run one after another).
struct RankMemory {
  std::vector<int> ranks;
  std::vector<std::string> roles;  // on these ranks, in plan order
  int64_t resident = 0;            // Σ weights + grads + optimizer (an engine sharing its trainer's weights adds none)
  int64_t transient = 0;           // max over the roles of MemoryEstimate::transient()
  std::string transient_role;      // the role it comes from
  int64_t peak() const { return resident + transient; }
};

struct Plan {
  int world = 1;
  int gpus_per_node = 4;
  std::vector<RolePlan> roles;
  std::vector<std::string> warnings;
  int node_of(int rank) const { return rank / gpus_per_node; }
  int local_device(int rank) const { return rank % gpus_per_node; }
};

// The mesh of model role `role`, or of its rollout engine ("<role>.rollout")
// when `rollout`, on its placement range: what `hpcrl plan` prints is what
// `hpcrl run` builds. InputError when the target has no range or its layout
// does not fit the range.
Mesh role_mesh(const config::PipelineConfig& config, const config::ModelConfig& role, bool rollout, int world);

// `config` must be validated for `world` ranks (config::check_pipeline_config).
// InputError when a role's layout does not fit its ranks or its model.
Plan make_plan(const config::PipelineConfig& config, int world, int gpus_per_node);

// The memory of one role's busiest rank on `mesh` for the work it does.
MemoryEstimate estimate_memory(const ModelArch& arch, const config::ModelConfig& role, const Mesh& mesh,
                               config::DType dtype, const RoleWork& work);

// Peak bytes per rank, ranks with the same roles and numbers grouped, by first rank.
// Each role counts at its busiest rank, so a pp stage that holds fewer layers is over-counted.
std::vector<RankMemory> rank_memory(const Plan& plan);

nlohmann::json plan_json(const Plan& plan);
std::string plan_text(const Plan& plan);

}  // namespace hpcrl::dist
