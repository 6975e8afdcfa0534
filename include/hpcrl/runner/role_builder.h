// Builds every model role of a pipeline on this rank: its rank set (whole world
// when colocated, its range when disaggregated), its mesh groups (dense order
// tp-sp-dp-pp, experts tp-ep-edp-pp, docs/communication.md) as communicators, its model
// shard (preset with seeded weights, an HF checkpoint directory, or an empty
// shell for `init: {from: role}` that is filled when first used), and its
// tokenizer. Shards are built and initialised on the host, then moved to
// `device` (run.device, bound by dist::bind_device) in run.dtype; AdamW keeps
// fp32 master weights for bf16 parameters. Collective over the world: every
// rank takes part in creating every group, members or not.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::runner {

class Roles {
 public:
  Roles(const config::PipelineConfig& cfg, int world_rank, int world_size, at::Device device = at::kCPU);

  algo::Role& get(const std::string& name);
  // "<name>.rollout": the generation copy of a grpo/ppo policy that generates on
  // ranks of its own or in another tp/sp/ep layout; null otherwise.
  algo::Role* rollout_of(const std::string& name);
  // Copies the weights of `init.from` sources into roles that are first used by
  // `stage` and not yet initialised (collective over the source's groups).
  void snapshot_for(const config::StageConfig& stage);
  // Marks roles as initialised (e.g. restored from a checkpoint on resume).
  void mark_initialised(const std::string& name) { initialised_.insert(name); }

 private:
  void ensure_initialised(const std::string& name);
  // The generation copy of `mc` on the ranks of `<name>.rollout` (its own range,
  // or the role's), in its rollout layout, its weights filled by the first weight sync.
  algo::Role build_rollout_role(const config::ModelConfig& mc, int world_rank, int world_size, at::Device device,
                                at::ScalarType dtype);

  const config::PipelineConfig& cfg_;
  std::map<std::string, algo::Role> roles_;
  std::map<std::string, algo::Role> rollout_roles_;  // by the trained role's name
  std::set<std::string> initialised_;
};

}  // namespace hpcrl::runner
