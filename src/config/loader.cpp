// The loader (loader.h): file -> YAML tree -> overrides -> typed config ->
// defaults resolved -> cross-section validation. Every pass runs even when an
// earlier one found errors (the structs hold defaults where a value was bad),
// so one run of `hpcrl validate` reports everything; passes skip what an
// earlier error already explains. Errors are then ordered by position.
#include "hpcrl/config/loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "config/passes.h"
#include "config/schema_sections.h"

namespace hpcrl::config {

namespace {

std::string default_run_name(const std::string& file) {
  std::string stem = std::filesystem::path(file).stem().string();
  for (char& ch : stem)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')) ch = '_';
  while (!stem.empty() && stem[0] == '.') stem.erase(0, 1);
  return stem.empty() ? "run" : stem;
}

void sort_by_position(std::vector<Diagnostic>& list) {
  std::stable_sort(list.begin(), list.end(), [](const Diagnostic& a, const Diagnostic& b) {
    auto key = [](const Diagnostic& d) { return std::make_tuple(d.pos.from_override(), d.pos.line, d.pos.col); };
    return key(a) < key(b);
  });
}

LoadResult check_tree(std::optional<YNode> root, const std::string& file, const std::vector<std::string>& overrides,
                      const ValidateOptions& options, Diagnostics diag) {
  LoadResult res;
  res.config.file = file;
  if (root && !root->is_map()) {
    diag.error(root->pos, "", "the top level must be a mapping (run:, models:, data:, stages:, ...), got " + root->describe(),
               "start from configs/quickstart.yaml");
    root.reset();
  }
  if (root) {
    apply_overrides(*root, overrides, file, diag);
    schema::Reading reading{diag, res.config.positions, {}};
    schema::pipeline_codec().read(*root, "", reading, res.config);
    resolve_defaults(res.config);
    validate_models(res.config, options, diag);
    validate_stages(res.config, options, diag);
    validate_tools(res.config, diag);
  }
  sort_by_position(diag.errors);
  sort_by_position(diag.warnings);
  res.diagnostics = std::move(diag);
  return res;
}

}  // namespace

void resolve_defaults(PipelineConfig& c) {
  auto given = [&](const std::string& path) { return c.positions.count(path) > 0; };
  if (!given("run.name")) c.run.name = default_run_name(c.file);
  if (!given("run.out")) c.run.out = "runs/" + c.run.name;
  for (auto& st : c.stages) {
    bool own = given(st.path + ".eval_every");
    if (!own) std::visit([&](auto& s) { s.eval_every = c.run.eval_every; }, st.body);
    if (auto* ppo = st.as<PpoStage>(); ppo && !given(st.path + ".critic_lr")) ppo->critic_lr = ppo->train.lr;
  }
  for (auto& d : c.data)
    if (d.kind == DataKind::synthetic && !given("data." + d.name + ".synthetic.seed")) d.synthetic.seed = c.run.seed;
  for (auto& m : c.models) {
    std::string base = "models." + m.name + ".rollout.parallel.";
    ParallelConfig& r = m.rollout.parallel;
    if (!given(base + "tp")) r.tp = m.parallel.tp;
    if (!given(base + "sp")) r.sp = m.parallel.sp;
    if (!given(base + "ep")) r.ep = m.parallel.ep;
    if (!given(base + "pp")) r.pp = 1;  // generation runs whole models (algo/stages/rollout_copy.h)
  }
}

LoadResult check_pipeline_config(const std::string& path, const std::vector<std::string>& overrides,
                                 const ValidateOptions& options) {
  Diagnostics diag;
  auto root = parse_yaml_file(path, diag);
  return check_tree(std::move(root), path, overrides, options, std::move(diag));
}

LoadResult check_pipeline_text(const std::string& yaml, const std::string& label,
                               const std::vector<std::string>& overrides, const ValidateOptions& options) {
  Diagnostics diag;
  auto root = parse_yaml_text(yaml, label, diag);
  if (root && root->is_null()) {
    SourcePos whole;
    whole.file = label;
    diag.error(whole, "", "is empty (no YAML content)", "write a pipeline; configs/quickstart.yaml is a complete example");
    root.reset();
  }
  return check_tree(std::move(root), label, overrides, options, std::move(diag));
}

PipelineConfig load_pipeline_config(const std::string& path, const std::vector<std::string>& overrides,
                                    const ValidateOptions& options) {
  LoadResult res = check_pipeline_config(path, overrides, options);
  for (const auto& w : res.diagnostics.warnings) spdlog::warn("{}", w.str());
  if (!res.ok()) throw ConfigError(res.diagnostics.errors);
  return std::move(res.config);
}

std::vector<std::string> schema_key_paths() {
  std::vector<std::string> out;
  schema::pipeline_codec().keys("", out);
  return out;
}

}  // namespace hpcrl::config
