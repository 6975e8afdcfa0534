// The rank map of a pipeline for `hpcrl plan`: for every model role (and every
// rollout engine that generates) its mesh on its placement range, each rank's
// node and local device, every group's members, warnings (tp/sp groups that
// cross nodes), and a per-rank memory estimate when the architecture is known.
// Pure computation: no MPI, no launcher. JSON shape: DESIGN §10, docs/communication.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/dist/mesh.h"

namespace hpcrl::dist {

// Bytes on the busiest rank of a role (the pp stage holding the most parameters).
struct MemoryEstimate {
  int64_t parameters = 0;    // parameters held by that rank
  int64_t weights = 0;
  int64_t grads = 0;         // trained roles only
  int64_t optimizer = 0;     // AdamW: fp32 moments (+ fp32 master for bf16), / dp with zero1
  int64_t activations = 0;   // trained roles: one micro-batch of seq_len-token sequences
  int64_t kv_cache = 0;      // rollout engines: max_batch sequences at seq_len
  int64_t seq_len = 0, micro_batch = 0, kv_sequences = 0;  // the assumptions behind the last two
  int64_t total() const { return weights + grads + optimizer + activations + kv_cache; }
};

struct RolePlan {
  std::string name;          // "policy" or "policy.rollout"
  Mesh mesh;
  std::optional<MemoryEstimate> memory;
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

// The memory of one role's busiest rank on `mesh` (`trained`: grads, optimizer,
// activations of `micro_batch` sequences; `generates`: KV cache for `kv_sequences`
// sequences), sequences of `seq_len` tokens.
MemoryEstimate estimate_memory(const ModelArch& arch, const config::ModelConfig& role, const Mesh& mesh,
                               config::DType dtype, bool trained, int64_t micro_batch, int64_t seq_len,
                               bool generates, int64_t kv_sequences);

nlohmann::json plan_json(const Plan& plan);
std::string plan_text(const Plan& plan);

}  // namespace hpcrl::dist
