// Role construction: mesh groups, model shards, tokenizers (see role_builder.h).
#include "hpcrl/runner/role_builder.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hpcrl/config/layout.h"
#include "hpcrl/dist/bootstrap.h"
#include "hpcrl/dist/rank_generator.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/util/check.h"

namespace hpcrl::runner {

namespace {
// The communicator of this rank's group among `groups` (null when the dimension has size 1).
dist::CommPtr group_comm(const dist::RankGroups& groups, const std::string& name) {
  if (groups.empty() || groups.front().size() == 1) return nullptr;
  return dist::new_groups(groups, name);
}

int position_in(const dist::RankGroups& groups, int rank) {
  for (const auto& g : groups)
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] == rank) return static_cast<int>(i);
  return -1;
}

std::string tokenizer_spec(const std::string& t) { return t == "byte" || t.empty() ? "builtin" : t; }

// A pipelined role (pp > 1) holds only its stage's layers, so it can run only
// where a stage drives it through the pipeline executor: every stage does for
// the roles it trains and scores with (SFT's model; GRPO's and PPO's policy,
// reference and critic; distillation's student and teacher), and generation
// uses a pp = 1 copy (algo/rollout_copy.h). The model of a `type: model`
// reward scores responses unpipelined, so a pipelined one is refused here,
// before a model is built, naming the stage.
void check_pipeline_uses(const config::PipelineConfig& cfg, const config::ModelConfig& mc) {
  if (mc.parallel.pp == 1) return;
  const std::string& n = mc.name;
  for (const auto& st : cfg.stages) {
    std::vector<std::string> rewards;
    if (st.kind == config::StageKind::grpo) rewards = st.grpo.rewards;
    if (st.kind == config::StageKind::ppo) rewards = st.ppo.rewards;
    for (const auto& r : rewards) {
      const config::RewardConfig* rc = cfg.find_reward(r);
      HPCRL_CHECK_INPUT(!rc || rc->type != config::RewardType::model || rc->model != n,
                        cfg.pos("models." + n + ".parallel.pp").str()
                            << ": models." << n << ".parallel.pp = " << mc.parallel.pp << ", but stage " << st.path
                            << " scores responses with role '" << n << "' (the model of reward '" << r
                            << "'), and reward models run unpipelined so far; use pp: 1 for this role "
                            << "(split it with tp/sp instead)");
    }
  }
}
}  // namespace

Roles::Roles(const config::PipelineConfig& cfg, int world_rank, int world_size, at::Device device) : cfg_(cfg) {
  const at::ScalarType dtype = cfg.run.dtype == config::DType::bfloat16 ? at::kBFloat16 : at::kFloat;
  int role_index = 0;
  for (const auto& mc : cfg.models) {
    algo::Role role;
    role.name = mc.name;
    role.config = &mc;
    auto span = config::ranks_of(cfg, mc.name, world_size);
    const auto& p = mc.parallel;
    check_pipeline_uses(cfg, mc);  // on every rank, so all of them stop with the message
    const int tp = int(p.tp), sp = int(p.sp), pp = int(p.pp), ep = int(p.ep);
    const int dp = int(config::data_parallel_degree(p, span.count));
    const int first = int(span.first);
    dist::RankGenerator dense("tp-sp-dp-pp", {{"tp", tp}, {"sp", sp}, {"dp", dp}, {"pp", pp}}, first);
    dist::RankGenerator expert("tp-ep-edp-pp", {{"tp", tp}, {"ep", ep}, {"edp", sp * dp / ep}, {"pp", pp}}, first);
    HPCRL_CHECK(dense.get("pp") == expert.get("pp"), "dense and expert decompositions disagree on pp groups for role "
                << mc.name);
    const std::string n = mc.name;
    role.ctx.tp = group_comm(dense.get("tp"), n + "/tp");
    role.ctx.sp = group_comm(dense.get("sp"), n + "/sp");
    role.ctx.dp = group_comm(dense.get("dp"), n + "/dp");
    role.ctx.grad = group_comm(dense.get("sp-dp"), n + "/dp-sp");
    role.ctx.pp = group_comm(dense.get("pp"), n + "/pp");
    role.ctx.ep = group_comm(expert.get("ep"), n + "/ep");
    role.edp = group_comm(expert.get("edp"), n + "/edp");
    const bool member = world_rank >= first && world_rank < first + span.count;
    role.dp_rank = member ? std::max(0, position_in(dense.get("dp"), world_rank)) : 0;
    role.dp_size = dp;
    role.writer = world_rank == first;
    if (member) {
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
      role.model->to(device, dtype);
      role.tokenizer = std::shared_ptr<io::Tokenizer>(io::load_tokenizer(tokenizer_spec(mc.tokenizer)));
      spdlog::info("role {}: {} layers, d={}, tp={} sp={} ep={} dp={} pp={} on ranks {}-{}, {} {}", n,
                   mc.arch->num_layers, mc.arch->hidden_size, tp, sp, ep, dp, pp, first, first + span.count - 1,
                   device.str(), config::to_string(cfg.run.dtype));
      if (pp > 1) spdlog::info("role {}: pipeline {}", n, role.model->pipeline_layout().describe());
    } else if (mc.init.kind != config::InitKind::from) {
      initialised_.insert(n);
    }
    roles_.emplace(n, std::move(role));
    ++role_index;
  }
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
  if (stage.kind == config::StageKind::grpo) rewards = stage.grpo.rewards;
  if (stage.kind == config::StageKind::ppo) rewards = stage.ppo.rewards;
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
  if (dst.member()) {
    HPCRL_CHECK_INPUT(src.member(), "role " << name << " (init from " << src_name
                      << ") shares no ranks with its source in this placement; colocate them");
    std::map<std::string, at::Tensor> m(full.begin(), full.end());
    model::load_weights(*dst.model, m, "snapshot of role " + src_name);
  }
  initialised_.insert(name);
  spdlog::info("role {}: snapshot of role {}", name, src_name);
}

}  // namespace hpcrl::runner
