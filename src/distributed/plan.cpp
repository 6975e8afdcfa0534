// Building and printing the rank map of a pipeline (see plan.h). Which roles
// appear: every model role that has ranks, plus "<role>.rollout" for roles
// that generate (GRPO/PPO policies, on-policy distillation students,
// sequence-level distillation teachers) with their rollout layout. The
// sequence length behind the memory estimate is the longest a stage can use
// (a JSONL dataset's max_prompt_len plus max_new_tokens or max_response_len),
// or the model's context when a stage does not bound it.
#include "hpcrl/distributed/plan.h"

#include "hpcrl/util/strings.h"

#include <algorithm>
#include <map>
#include <cstdio>
#include <set>
#include <sstream>

#include "hpcrl/distributed/placement.h"
#include "hpcrl/util/check.h"

namespace hpcrl::dist {
namespace {

ParallelSizes sizes_of(const config::ParallelConfig& p) {
  return {static_cast<int>(p.tp), static_cast<int>(p.sp), static_cast<int>(p.ep), 0, static_cast<int>(p.pp)};
}

Placement placement_of(const config::PipelineConfig& cfg, int world) {
  if (cfg.placement.mode == config::PlacementMode::colocated) return Placement::colocated(world);
  std::map<std::string, RankRange> ranges;
  for (const auto& r : cfg.placement.ranges)
    ranges[r.target] = {static_cast<int>(r.first), static_cast<int>(r.last)};
  return Placement::disaggregated(world, ranges);
}

// What the stages do with each role: train it, generate with it, the largest
// micro-batch, and the longest sequence (0 = unknown: the model's context is used).
struct RoleUse {
  std::set<std::string> trained, generating, logprobs;
  std::map<std::string, int64_t> micro_batch, seq_len;
  std::set<std::string> seq_unknown;
};

// Adds each stage's roles to a RoleUse, one overload per stage kind.
class RoleUseBuilder {
 public:
  explicit RoleUseBuilder(const config::PipelineConfig& cfg) : cfg_(cfg) {}

  void add(const config::StageConfig& st) {
    for (const auto& r : st.trained_roles()) use_.trained.insert(r);
    std::visit([&](const auto& s) { add(s); }, st.body);
  }
  RoleUse take() { return std::move(use_); }

 private:
  void add(const config::SftStage& s) {
    note(s.model, s.train.micro_batch, seq(s.data, response_len(s.data)));
  }
  // `critic`: PPO's, null for GRPO.
  void add_rl(const config::RlStage& rl, const std::string* critic) {
    const int64_t s = seq(rl.data, rl.sampling.max_new_tokens);
    use_.generating.insert(rl.policy);
    note(rl.policy, rl.train.micro_batch, s);
    if (!rl.reference.empty()) note(rl.reference, 1, s);
    if (critic) note(*critic, rl.train.micro_batch, s, false);
  }
  void add(const config::GrpoStage& s) { add_rl(s, nullptr); }
  void add(const config::PpoStage& s) { add_rl(s, &s.critic); }
  void add(const config::DistillStage& d) {
    const bool generated = d.on_policy || d.sequence_level;
    const int64_t s = seq(d.data, generated ? d.sampling.max_new_tokens : response_len(d.data));
    if (d.on_policy) use_.generating.insert(d.student);
    if (d.sequence_level) use_.generating.insert(d.teacher);
    note(d.student, d.train.micro_batch, s);
    note(d.teacher, 1, s);
  }

  // `logprobs`: the role's forward ends in log-probs over the vocabulary (not a critic's values).
  void note(const std::string& role, int64_t mb, int64_t seq, bool logprobs = true) {
    int64_t& m = use_.micro_batch[role];
    m = std::max<int64_t>({m, mb, 1});
    if (seq <= 0) use_.seq_unknown.insert(role);
    int64_t& s = use_.seq_len[role];
    s = std::max(s, seq);
    if (logprobs) use_.logprobs.insert(role);
  }
  // Prompt budget of a dataset plus `response` tokens; 0 when either is unknown.
  int64_t seq(const std::string& data, int64_t response) const {
    const config::DatasetConfig* d = cfg_.find_data(data);
    if (!d || d->kind != config::DataKind::jsonl || d->jsonl.max_prompt_len <= 0 || response <= 0) return 0;
    return d->jsonl.max_prompt_len + response;
  }
  int64_t response_len(const std::string& data) const {
    const config::DatasetConfig* d = cfg_.find_data(data);
    return d && d->kind == config::DataKind::jsonl ? d->jsonl.max_response_len : 0;
  }

  const config::PipelineConfig& cfg_;
  RoleUse use_;
};

RoleUse role_use(const config::PipelineConfig& cfg) {
  RoleUseBuilder b(cfg);
  for (const auto& st : cfg.stages) b.add(st);
  return b.take();
}

// One warning per (role, kind) whose groups span nodes.
void warn_cross_node(const Plan& plan, const RolePlan& rp, GroupKind kind, const char* why,
                     std::vector<std::string>& warnings) {
  int crossing = 0;
  const std::vector<int>* example = nullptr;
  for (const auto& g : rp.mesh.groups(kind)) {
    if (plan.node_of(g.front()) != plan.node_of(g.back())) {
      ++crossing;
      if (!example) example = &g;
    }
  }
  if (!crossing) return;
  std::ostringstream os;
  os << rp.name << ": " << crossing << " of " << rp.mesh.groups(kind).size() << " " << group_name(kind)
     << " groups span nodes (e.g. ranks " << example->front() << "-" << example->back() << " on nodes "
     << plan.node_of(example->front()) << "-" << plan.node_of(example->back()) << " with " << plan.gpus_per_node
     << " GPUs per node); " << why;
  warnings.push_back(os.str());
}

}  // namespace

Mesh role_mesh(const config::PipelineConfig& cfg, const config::ModelConfig& m, bool rollout, int world) {
  const std::string name = rollout ? m.name + Placement::kRolloutSuffix : m.name;
  const RankRange range = placement_of(cfg, world).range(name);
  return Mesh(sizes_of(rollout ? m.rollout.parallel : m.parallel), range.first, range.size(), name);
}

Plan make_plan(const config::PipelineConfig& cfg, int world, int gpus_per_node) {
  HPCRL_CHECK_INPUT(world >= 1, "--world must be at least 1 (got " << world << ")");
  HPCRL_CHECK_INPUT(gpus_per_node >= 1, "--gpus-per-node must be at least 1 (got " << gpus_per_node << ")");
  Plan plan;
  plan.world = world;
  plan.gpus_per_node = gpus_per_node;
  Placement placement = placement_of(cfg, world);
  RoleUse use = role_use(cfg);
  for (const auto& m : cfg.models) {
    for (bool rollout : {false, true}) {
      if (rollout && !use.generating.count(m.name)) continue;
      const std::string name = rollout ? m.name + Placement::kRolloutSuffix : m.name;
      if (!placement.has(name)) {
        plan.warnings.push_back(name + ": no placement range; not planned (add placement.ranges." + name + ")");
        continue;
      }
      Mesh mesh = role_mesh(cfg, m, rollout, world);
      std::optional<MemoryEstimate> memory;
      if (m.arch) {
        mesh.check_model(m.arch->dims());  // sequence length unknown here
        RoleWork work;
        work.trained = !rollout && use.trained.count(m.name) && !m.frozen;
        work.logprobs = !rollout && use.logprobs.count(m.name);
        work.generates = rollout;
        work.micro_batch = use.micro_batch.count(m.name) ? use.micro_batch[m.name] : 1;
        const int64_t context = m.arch->max_position_embeddings;
        work.seq_len = use.seq_unknown.count(m.name) || !use.seq_len.count(m.name)
                           ? context
                           : std::min(use.seq_len[m.name], context);
        work.kv_sequences = m.rollout.max_batch;
        // rollout/slot_projections.h: packed from two rows on.
        work.packs_weights = rollout && cfg.run.device == config::Device::cpu &&
                             cfg.run.dtype == config::DType::float32 && m.rollout.max_batch > 1;
        work.generates_in_place = !rollout && use.generating.count(m.name) &&
                                  !(cfg.run.device == config::Device::cpu && cfg.run.dtype == config::DType::float32);
        memory = estimate_memory(*m.arch, m, mesh, cfg.run.dtype, work);
        // A reference that is a LoRA policy's frozen base runs the policy's weights.
        if (!rollout && !config::lora_base_of(cfg, m).empty()) memory->weights = 0;
      }
      // Generation in the training layout on the same ranks uses the role's own weights (algo/stages/rollout_copy.cpp).
      const auto &t = m.parallel, &g = m.rollout.parallel;
      const bool same_layout = t.tp == g.tp && t.sp == g.sp && t.ep == g.ep && t.pp == 1;
      const bool shares = rollout && same_layout && placement.has(m.name) &&
                          placement.range(name).first == placement.range(m.name).first &&
                          placement.range(name).size() == placement.range(m.name).size();
      plan.roles.push_back({name, std::move(mesh), memory, shares});
    }
  }
  for (const auto& rp : plan.roles) {
    warn_cross_node(plan, rp, GroupKind::kTp, "tensor parallelism all-reduces every layer and wants NVLink: keep tp "
                                              "within a node (tp <= gpus per node, dividing it)", plan.warnings);
    warn_cross_node(plan, rp, GroupKind::kSp, "Ulysses all-to-alls every attention layer: keep tp·sp within a node",
                    plan.warnings);
  }
  return plan;
}

nlohmann::json plan_json(const Plan& plan) {
  using nlohmann::json;
  json roles = json::object();
  for (const auto& rp : plan.roles) {
    const Mesh& m = rp.mesh;
    json ranks = json::array();
    for (int r = m.first_rank(); r <= m.last_rank(); ++r) {
      MeshCoord c = m.coord(r);
      ranks.push_back({{"rank", r}, {"node", plan.node_of(r)}, {"local_device", plan.local_device(r)},
                       {"tp", c.tp}, {"sp", c.sp}, {"ep", c.ep}, {"dp", c.dp}, {"pp", c.pp}, {"edp", c.edp}});
    }
    json groups = json::object();
    for (GroupKind k : kAllGroupKinds) groups[group_name(k)] = m.groups(k);
    json role = {{"parallel", {{"tp", m.tp()}, {"sp", m.sp()}, {"ep", m.ep()}, {"dp", m.dp()}, {"pp", m.pp()}, {"edp", m.edp()}}},
                 {"first_rank", m.first_rank()},
                 {"last_rank", m.last_rank()},
                 {"ranks", ranks},
                 {"groups", groups}};
    if (rp.memory) {
      const MemoryEstimate& e = *rp.memory;
      role["memory_bytes"] = {{"parameters", e.parameters},
                              {"weights", e.weights},
                              {"grads", e.grads},
                              {"optimizer", e.optimizer},
                              {"engine_weights", e.engine_weights},
                              {"activations", e.activations},
                              {"activations_full", e.activations_full},
                              {"activations_checkpointed", e.activations_checkpointed},
                              {"logits", e.logits},
                              {"kv_cache", e.kv_cache},
                              {"grad_buffers", e.grad_buffers},
                              {"param_gathers", e.param_gathers},
                              {"whole_gathers", e.whole_gathers},
                              {"resident", e.resident()},
                              {"transient", e.transient()},
                              {"total", e.total()}};
      role["memory_assumptions"] = {{"seq_len", e.seq_len}, {"micro_batch", e.micro_batch}, {"kv_sequences", e.kv_sequences}};
    } else {
      role["memory_bytes"] = nullptr;
    }
    roles[rp.name] = role;
  }
  json peaks = json::array();
  for (const auto& m : rank_memory(plan))
    peaks.push_back({{"ranks", m.ranks}, {"roles", m.roles}, {"resident", m.resident}, {"transient", m.transient},
                     {"transient_role", m.transient_role}, {"peak", m.peak()}});
  return {{"world", plan.world}, {"gpus_per_node", plan.gpus_per_node}, {"roles", roles}, {"rank_memory", peaks},
          {"warnings", plan.warnings}};
}

namespace {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return text;
}

std::string group_line(const RankGroups& groups, size_t show) {
  std::ostringstream os;
  for (size_t i = 0; i < groups.size() && i < show; ++i) {
    os << (i ? " " : "") << "[";
    for (size_t k = 0; k < groups[i].size(); ++k) {
      if (k == 8 && groups[i].size() > 10) {
        os << ",…," << groups[i].back();
        break;
      }
      os << (k ? "," : "") << groups[i][k];
    }
    os << "]";
  }
  if (groups.size() > show) os << " … (" << groups.size() << " groups)";
  return os.str();
}

// A role's ranks (the first 16) with their node, device and mesh coordinates.
void rank_table(std::ostream& os, const Plan& plan, const Mesh& m) {
  const int shown = std::min(m.size(), 16);
  os << "  rank  node  dev   tp  sp  ep  dp  pp\n";
  for (int r = m.first_rank(); r < m.first_rank() + shown; ++r) {
    MeshCoord c = m.coord(r);
    char line[96];
    std::snprintf(line, sizeof(line), "  %4d  %4d  %3d  %3d %3d %3d %3d %3d\n", r, plan.node_of(r),
                  plan.local_device(r), c.tp, c.sp, c.ep, c.dp, c.pp);
    os << line;
  }
  if (m.size() > shown) os << "  … " << m.size() - shown << " more ranks (--json lists all)\n";
}

// A role's communication groups, one line per kind.
void group_lines(std::ostream& os, const Mesh& m) {
  // A kind whose groups are all one rank communicates nothing: it is left out (--json lists it).
  std::vector<std::string> alone;
  for (GroupKind k : kAllGroupKinds) {
    const RankGroups& g = m.groups(k);
    if (std::all_of(g.begin(), g.end(), [](const std::vector<int>& one) { return one.size() <= 1; })) {
      alone.push_back(group_name(k));
      continue;
    }
    char label[16];
    std::snprintf(label, sizeof(label), "  %-6s", group_name(k));
    os << label << group_line(g, 4) << "\n";
  }
  if (!alone.empty()) os << "  (groups of one rank, not shown: " << str::join(alone, ", ") << ")\n";
}

void memory_line(std::ostream& os, const std::optional<MemoryEstimate>& memory) {
  if (!memory) {
    os << "  memory: unknown (the architecture could not be read)\n";
    return;
  }
  const MemoryEstimate& e = *memory;
  os << "  memory per rank (busiest pp stage, " << e.parameters << " parameters): weights "
     << human_bytes(e.weights) << ", grads " << human_bytes(e.grads) << ", optimizer " << human_bytes(e.optimizer)
     << (e.engine_weights ? ", engine's packed weights " + human_bytes(e.engine_weights) : std::string())
     << ", activations " << human_bytes(e.activations) << " (" << human_bytes(e.activations_full)
     << " without checkpointing, " << human_bytes(e.activations_checkpointed) << " with), logits "
     << human_bytes(e.logits) << ", kv cache " << human_bytes(e.kv_cache)
     << (e.grad_buffers ? ", gradient reduction buffers " + human_bytes(e.grad_buffers) : std::string())
     << (e.param_gathers ? ", ZeRO-3 gathered layers " + human_bytes(e.param_gathers) + " (whole model " +
                               human_bytes(e.whole_gathers) + " more while generating or saving)"
                         : std::string())
     << " = "
     << human_bytes(e.total())
     << " (seq_len " << e.seq_len << ")\n";
}

void peak_lines(std::ostream& os, const Plan& plan) {
  const auto peaks = rank_memory(plan);
  if (!peaks.empty()) os << "\npeak memory per rank (each role's resident state + the largest transient one):\n";
  for (const auto& m : peaks) {
    std::string roles;
    for (const auto& r : m.roles) roles += (roles.empty() ? "" : ", ") + r;
    os << "  ranks " << m.ranks.front() << (m.ranks.size() > 1 ? "-" + std::to_string(m.ranks.back()) : "") << ": "
       << human_bytes(m.peak()) << " = resident " << human_bytes(m.resident) << " (" << roles << ") + transient "
       << human_bytes(m.transient) << (m.transient_role.empty() ? "" : " (" + m.transient_role + ")") << "\n";
  }
}

}  // namespace

std::string plan_text(const Plan& plan) {
  std::ostringstream os;
  os << "world " << plan.world << " ranks, " << plan.gpus_per_node << " per node ("
     << (plan.world + plan.gpus_per_node - 1) / plan.gpus_per_node << " nodes)\n";
  for (const auto& rp : plan.roles) {
    const Mesh& m = rp.mesh;
    os << "\n" << rp.name << ": " << m.describe() << " (edp=" << m.edp() << ")\n";
    rank_table(os, plan, m);
    group_lines(os, m);
    memory_line(os, rp.memory);
  }
  peak_lines(os, plan);
  for (const auto& w : plan.warnings) os << "\nwarning: " << w;
  if (!plan.warnings.empty()) os << "\n";
  return os.str();
}

}  // namespace hpcrl::dist
