// Lookups on a loaded pipeline (pipeline_config.h): roles, rewards and
// datasets by name, and the source position of any key path (a stage's roles:
// stage_config.cpp).
#include "hpcrl/config/pipeline_config.h"

#include <algorithm>

#include "hpcrl/util/error.h"

namespace hpcrl::config {

namespace {
template <class T>
const T* find_named(const std::vector<T>& items, const std::string& name) {
  for (const auto& item : items)
    if (item.name == name) return &item;
  return nullptr;
}
}  // namespace

const ModelConfig* PipelineConfig::find_model(const std::string& role) const { return find_named(models, role); }
const RewardConfig* PipelineConfig::find_reward(const std::string& name) const { return find_named(rewards, name); }
const ToolConfig* PipelineConfig::find_tool(const std::string& name) const { return find_named(tools, name); }
const DatasetConfig* PipelineConfig::find_data(const std::string& name) const { return find_named(data, name); }

const ModelConfig& PipelineConfig::model(const std::string& role) const {
  const ModelConfig* m = find_model(role);
  if (!m) throw InputError(file + ": no model role '" + role + "' under models; define it or fix the name");
  return *m;
}

SourcePos PipelineConfig::pos(const std::string& key_path) const {
  std::string p = key_path;
  while (!p.empty()) {
    auto it = positions.find(p);
    if (it != positions.end()) return it->second;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p = p.substr(0, cut);
  }
  SourcePos whole;
  whole.file = file;
  return whole;
}

namespace {
bool same_ranks(const PipelineConfig& cfg, const std::string& a, const std::string& b) {
  if (cfg.placement.mode != PlacementMode::disaggregated) return true;
  const RankRange *ra = nullptr, *rb = nullptr;
  for (const auto& r : cfg.placement.ranges) {
    if (r.target == a) ra = &r;
    if (r.target == b) rb = &r;
  }
  return ra && rb && ra->first == rb->first && ra->last == rb->last;
}

bool lists(const std::vector<std::string>& roles, const std::string& name) {
  return std::find(roles.begin(), roles.end(), name) != roles.end();
}

}  // namespace

std::string lora_base_of(const PipelineConfig& cfg, const ModelConfig& mc) {
  if (mc.init.kind != InitKind::from) return "";
  const ModelConfig* src = cfg.find_model(mc.init.from);
  // The source must be built first (models are built in config order).
  if (!src || src >= &mc || !src->lora.enabled() || mc.lora.enabled() || mc.head != src->head) return "";
  const auto &a = mc.parallel, &b = src->parallel;
  if (a.tp != b.tp || a.sp != b.sp || a.ep != b.ep || a.pp != b.pp || !same_ranks(cfg, mc.name, src->name)) return "";
  size_t first_use = cfg.stages.size(), first_training = cfg.stages.size();
  for (size_t i = 0; i < cfg.stages.size(); ++i) {
    const StageConfig& st = cfg.stages[i];
    if (lists(st.trained_roles(), mc.name)) return "";
    if (lists(st.trained_roles(), src->name)) first_training = std::min(first_training, i);
    if (!lists(st.used_roles(), mc.name)) continue;
    const RlStage* rl = st.rl();
    const std::string ref = rl ? rl->reference : std::string();
    if (ref != mc.name) return "";  // a teacher or a reward model, not only a reference
    first_use = std::min(first_use, i);
  }
  return first_use < cfg.stages.size() && first_use <= first_training ? src->name : "";
}

}  // namespace hpcrl::config
