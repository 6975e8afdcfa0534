// Role construction: mesh groups, model shards, tokenizers (see role_builder.h).
#include "hpcrl/runner/role_builder.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hpcrl/distributed/bridge.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/distributed/placement.h"
#include "hpcrl/distributed/plan.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/weight_sync.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::runner {

namespace {

// Whether the policy of a grpo/ppo stage generates on a copy of its own: on
// ranks of its own (placement.ranges.<name>.rollout apart from <name>'s) or in
// a tp/sp/ep layout other than its training one.
bool needs_generation_copy(const config::PipelineConfig& cfg, const config::ModelConfig& mc) {
  bool policy = false;
  for (const auto& st : cfg.stages)
    policy = policy || (st.rl() && st.rl()->policy == mc.name);
  if (!policy) return false;
  const auto &t = mc.parallel, &g = mc.rollout.parallel;
  if (t.tp != g.tp || t.sp != g.sp || t.ep != g.ep) return true;
  if (cfg.placement.mode != config::PlacementMode::disaggregated) return false;
  const config::RankRange *own = nullptr, *gen = nullptr;
  for (const auto& r : cfg.placement.ranges) {
    if (r.target == mc.name) own = &r;
    if (r.target == mc.name + dist::Placement::kRolloutSuffix) gen = &r;
  }
  return own && gen && (own->first != gen->first || own->last != gen->last);
}

}  // namespace

Roles::Roles(const config::PipelineConfig& cfg, int world_rank, int world_size, at::Device device) : cfg_(cfg) {
  const at::ScalarType dtype = cfg.run.dtype == config::DType::bfloat16 ? at::kBFloat16 : at::kFloat;
  int role_index = 0;
  for (const auto& mc : cfg.models) {
    algo::Role role;
    role.name = mc.name;
    role.config = &mc;
    role.mesh = dist::role_mesh(cfg, mc, /*rollout=*/false, world_size);
    const dist::MeshComms comms = dist::create_mesh_comms(role.mesh);  // collective over the world
    role.ctx = parallel::ParallelContext::of(comms);
    role.edp = dist::multi_rank(comms.edp);
    role.writer = world_rank == role.mesh.first_rank();
    const bool member = role.mesh.contains(world_rank);
    const std::string& n = mc.name;
    const auto& p = mc.parallel;
    if (const std::string base = config::lora_base_of(cfg, mc); !base.empty()) {
      algo::Role& src = roles_.at(base);
      role.model = src.model;
      role.tokenizer = src.tokenizer;
      role.adapters_off = true;
      initialised_.insert(n);
      if (member) spdlog::info("role {}: the frozen base of role {} (its LoRA adapters bypassed), no copy", n, base);
    } else if (member) {
      model::ModelOptions opts;
      opts.pp_layers = p.pp_layers;
      opts.pp_virtual_stages = int(p.pp_virtual);
      opts.lm_head = mc.head == config::Head::lm;
      opts.value_head = mc.head == config::Head::value;
      opts.activation_checkpointing = mc.activation_checkpointing;
      opts.seed = static_cast<uint64_t>(cfg.run.seed) * 1000u + static_cast<uint64_t>(role_index);
      if (mc.init.kind == config::InitKind::from) {
        opts.init = false;
        role.model = std::make_shared<model::DecoderModel>(*mc.arch, role.ctx, opts);
      } else {
        std::string spec = mc.init.kind == config::InitKind::preset ? "preset:" + mc.init.preset : mc.init.path;
        role.model = model::load_model(spec, role.ctx, opts);
        initialised_.insert(n);
      }
      if (auto lora = role.lora()) {
        model::attach_lora(*role.model, *lora, opts.seed);
        spdlog::info("role {}: LoRA rank {} alpha {} on {}; the base is frozen", n, lora->shape.rank,
                     lora->shape.alpha, str::join(lora->targets, ", "));
      }
      role.model->to(device, dtype);
      role.tokenizer = std::shared_ptr<io::Tokenizer>(io::load_tokenizer(io::configured_tokenizer_spec(mc.tokenizer)));
      spdlog::info("role {}: {} layers, d={}, {}, {} {}", n, mc.arch->num_layers, mc.arch->hidden_size,
                   role.mesh.describe(), device.str(), config::to_string(cfg.run.dtype));
      if (role.mesh.pp() > 1) spdlog::info("role {}: pipeline {}", n, role.model->pipeline_layout().describe());
    } else if (mc.init.kind != config::InitKind::from) {
      initialised_.insert(n);
    }
    roles_.emplace(n, std::move(role));
    ++role_index;
    if (needs_generation_copy(cfg, mc)) rollout_roles_.emplace(n, build_rollout_role(mc, world_rank, world_size, device, dtype));
  }
}

algo::Role Roles::build_rollout_role(const config::ModelConfig& mc, int world_rank, int world_size, at::Device device,
                                     at::ScalarType dtype) {
  algo::Role role;
  role.name = mc.name + dist::Placement::kRolloutSuffix;
  role.config = &mc;
  role.mesh = dist::role_mesh(cfg_, mc, /*rollout=*/true, world_size);
  const dist::MeshComms comms = dist::create_mesh_comms(role.mesh);  // collective over the world
  role.ctx = parallel::ParallelContext::of(comms);
  role.edp = dist::multi_rank(comms.edp);
  if (!role.mesh.contains(world_rank)) return role;
  model::ModelOptions opts;
  opts.init = false;  // the first weight sync fills it
  role.model = std::make_shared<model::DecoderModel>(*mc.arch, role.ctx, opts);
  role.model->to(device, dtype);
  role.tokenizer = std::shared_ptr<io::Tokenizer>(io::load_tokenizer(io::configured_tokenizer_spec(mc.tokenizer)));
  spdlog::info("role {}: generation copy, {}, {}", role.name, role.mesh.describe(), device.str());
  return role;
}

algo::Role* Roles::rollout_of(const std::string& name) {
  auto it = rollout_roles_.find(name);
  return it == rollout_roles_.end() ? nullptr : &it->second;
}

algo::Role& Roles::get(const std::string& name) {
  auto it = roles_.find(name);
  HPCRL_CHECK(it != roles_.end(), "unknown role " << name);
  return it->second;
}

void Roles::snapshot_for(const config::StageConfig& stage) {
  auto used = stage.used_roles();
  auto trained = stage.trained_roles();
  used.insert(used.end(), trained.begin(), trained.end());
  // The role of a `type: model` reward is read by the stage too.
  std::vector<std::string> rewards;
  if (const config::RlStage* rl = stage.rl()) rewards = rl->rewards;
  for (const auto& r : rewards)
    if (const config::RewardConfig* rc = cfg_.find_reward(r); rc && rc->type == config::RewardType::model)
      used.push_back(rc->model);
  for (const auto& name : used) ensure_initialised(name);
}

void Roles::ensure_initialised(const std::string& name) {
  if (initialised_.count(name)) return;
  algo::Role& dst = get(name);
  const std::string& src_name = dst.config->init.from;
  ensure_initialised(src_name);  // chains (a from b from c); validation rejects cycles
  algo::Role& src = get(src_name);
  // Every rank of the source gathers full tensors; members of the target load them.
  io::NamedTensors full;
  if (src.member()) full = model::gather_full_weights(*src.model);
  if (dst.mesh.first_rank() > src.mesh.last_rank() || dst.mesh.last_rank() < src.mesh.first_rank()) {
    // Ranks of its own (a reference beside a disaggregated trainer): the source's first rank broadcasts.
    const dist::Bridge bridge = dist::Bridge::create(src.mesh.first_rank(), {dst.mesh.first_rank(), dst.mesh.last_rank()},
                                                     src_name + "->" + name);  // collective over the world
    if (bridge.is_member())
      rollout::broadcast_weights(*bridge.comm(), 0, bridge.is_source() ? &full : nullptr,
                                 bridge.is_source() ? nullptr : dst.model.get());
  } else if (dst.member()) {
    HPCRL_CHECK_INPUT(src.member(), "role " << name << " (init from " << src_name
                      << ") shares only some ranks with its source in this placement; give it the same range or "
                         "a disjoint one");
    std::map<std::string, at::Tensor> m(full.begin(), full.end());
    model::load_weights(*dst.model, m, "snapshot of role " + src_name);
  }
  initialised_.insert(name);
  spdlog::info("role {}: snapshot of role {}", name, src_name);
}

}  // namespace hpcrl::runner
