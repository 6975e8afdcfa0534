// Validation of the model roles and their placement, after decoding: `init`
// sources (presets, HF directories, other roles — without cycles), the
// architecture each role resolves to, weights and tokenizer files, the
// disaggregated rank ranges, and every role's training and rollout layout
// against its rank count and its architecture (layout.h).
#include <algorithm>
#include <filesystem>
#include <set>

#include "config/passes.h"
#include "config/schema.h"
#include "hpcrl/config/layout.h"
#include "hpcrl/config/model_tokenizer.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config {
namespace stdfs = std::filesystem;

std::string name_fix(const std::string& name, const std::vector<std::string>& known, const std::string& section) {
  if (known.empty()) return "define it under " + section;
  std::string guess = schema::suggestion(name, known);
  std::string list = "defined under " + section + ": " + str::join(known, ", ");
  return guess.empty() ? list : "did you mean '" + guess + "'? (" + list + ")";
}

namespace {

std::vector<std::string> role_names(const PipelineConfig& c) {
  std::vector<std::string> out;
  for (const auto& m : c.models) out.push_back(m.name);
  return out;
}

bool is_file(const stdfs::path& p) {
  std::error_code ec;
  return stdfs::is_regular_file(p, ec);
}

void check_from_refs(PipelineConfig& c, Diagnostics& diag) {
  auto names = role_names(c);
  for (auto& m : c.models) {
    if (m.init.kind != InitKind::from) continue;
    std::string path = "models." + m.name + ".init.from";
    if (m.init.from == m.name) {
      diag.error(c.pos(path), path, "role '" + m.name + "' is initialised from itself",
                 "initialise it from another role, a preset or a path");
    } else if (!c.find_model(m.init.from)) {
      diag.error(c.pos(path), path, "no model role '" + m.init.from + "'", name_fix(m.init.from, names, "models"));
    }
  }
  // Cycles a -> b -> a: report each once, at its first role in file order.
  std::set<std::string> reported;
  for (const auto& m : c.models) {
    std::vector<std::string> chain{m.name};
    const ModelConfig* cur = &m;
    while (cur->init.kind == InitKind::from && cur->init.from != cur->name) {
      const ModelConfig* next = c.find_model(cur->init.from);
      if (!next) break;
      auto seen = std::find(chain.begin(), chain.end(), next->name);
      bool cycle = seen != chain.end(), starts_here = seen == chain.begin();
      chain.push_back(next->name);
      if (cycle) {
        if (starts_here && !reported.count(m.name)) {
          for (const auto& r : chain) reported.insert(r);
          std::string path = "models." + m.name + ".init.from";
          diag.error(c.pos(path), path, "initialisation cycle " + str::join(chain, " -> "),
                     "initialise one of these roles from a preset or a path");
        }
        break;
      }
      cur = next;
    }
  }
}

void resolve_arch(PipelineConfig& c, const ValidateOptions& opt, Diagnostics& diag) {
  auto presets = model_arch_preset_names();
  for (auto& m : c.models) {
    std::string base = "models." + m.name + ".init.";
    if (m.init.kind == InitKind::preset) {
      if (m.init.preset.empty()) continue;  // `init: {}`: reported by the schema
      if (std::find(presets.begin(), presets.end(), m.init.preset) == presets.end()) {
        diag.error(c.pos(base + "preset"), base + "preset", "unknown preset '" + m.init.preset + "'",
                   name_fix(m.init.preset, presets, "the built-in presets"));
        continue;
      }
      m.arch = model_arch_preset(m.init.preset);
    } else if (m.init.kind == InitKind::path) {
      stdfs::path dir(m.init.path);
      std::error_code ec;
      if (!stdfs::is_directory(dir, ec)) {
        diag.error(c.pos(base + "path"), base + "path",
                   stdfs::exists(dir, ec) ? "'" + m.init.path + "' is a file, not a model directory"
                                          : "model directory '" + m.init.path + "' does not exist",
                   "give an HF model directory holding config.json (and model.safetensors)");
        continue;
      }
      if (!is_file(dir / "config.json")) {
        diag.error(c.pos(base + "path"), base + "path", "no config.json in '" + m.init.path + "'",
                   "give an HF model directory; its config.json describes the architecture");
        continue;
      }
      try {
        m.arch = load_hf_config((dir / "config.json").string());
      } catch (const InputError& e) {
        diag.error(c.pos(base + "path"), base + "path", e.what(), "use a supported architecture (docs/config.md)");
        continue;
      }
      m.weights_present = is_file(dir / "model.safetensors") || is_file(dir / "model.safetensors.index.json");
      if (!m.weights_present) {
        std::string msg = "no weights in '" + m.init.path + "' (model.safetensors or model.safetensors.index.json)";
        std::string fix = "put the checkpoint there, or --set " + base + "path=DIR";
        if (opt.require_weights) diag.error(c.pos(base + "path"), base + "path", msg, fix);
        else diag.warning(c.pos(base + "path"), base + "path", msg + "; `run` will fail", fix);
      }
    }
  }
  // init.from: the source's architecture, following chains (cycles and bad names were reported).
  for (size_t round = 0; round < c.models.size(); ++round)
    for (auto& m : c.models)
      if (m.init.kind == InitKind::from && !m.arch)
        if (const ModelConfig* src = c.find_model(m.init.from); src && src->arch) m.arch = src->arch;
}

// The tokenizer a model directory records (config/model_tokenizer.h): "byte" when its
// config.json names the byte tokenizer, else the directory (whose tokenizer.json, if
// missing, is reported below; a bad config.json is reported where it is read).
std::string saved_tokenizer(const std::string& dir) {
  try {
    return recorded_model_tokenizer(dir) == kByteTokenizer ? kByteTokenizer : dir;
  } catch (const InputError&) {
    return dir;
  }
}

// The tokenizer a role gets when none is named: byte for presets, the model
// directory for init.path, the source's (named or default) for init.from.
std::string default_tokenizer(const PipelineConfig& c, const ModelConfig& m, int depth = 0) {
  switch (m.init.kind) {
    case InitKind::preset: return "byte";
    case InitKind::path: return saved_tokenizer(m.init.path);
    case InitKind::from: break;
  }
  const ModelConfig* src = c.find_model(m.init.from);
  if (!src || depth >= 16) return "";
  if (c.positions.count("models." + src->name + ".tokenizer")) return src->tokenizer;
  return default_tokenizer(c, *src, depth + 1);
}

void resolve_tokenizers(PipelineConfig& c, const ValidateOptions& opt, Diagnostics& diag) {
  for (auto& m : c.models) {
    std::string path = "models." + m.name + ".tokenizer";
    std::string fallback = default_tokenizer(c, m);
    // A resolved config names the default explicitly: that is still the default.
    if (c.positions.count(path) && m.tokenizer != fallback) {
      if (m.tokenizer != "byte" && !is_file(stdfs::path(m.tokenizer) / "tokenizer.json"))
        diag.error(c.pos(path), path, "no tokenizer.json in '" + m.tokenizer + "'",
                   "give a directory holding tokenizer.json, or `byte` for the built-in byte-level tokenizer");
      continue;
    }
    m.tokenizer = fallback;
    // The model directory of an init.path role should carry its tokenizer (reported once, at that role).
    if (m.init.kind == InitKind::path && m.arch && m.tokenizer != kByteTokenizer &&
        !is_file(stdfs::path(m.init.path) / "tokenizer.json")) {
      std::string msg = "no tokenizer.json in '" + m.init.path + "'";
      std::string fix = "put the tokenizer files beside the weights or set models." + m.name + ".tokenizer";
      SourcePos at = c.pos("models." + m.name + ".init.path");
      if (opt.require_weights) diag.error(at, path, msg, fix);
      else diag.warning(at, path, msg + "; `run` will fail", fix);
    }
  }
}

void check_placement(const PipelineConfig& c, const ValidateOptions& opt, Diagnostics& diag) {
  if (c.placement.mode != PlacementMode::disaggregated) return;
  std::vector<std::string> targets;
  for (const auto& m : c.models) {
    targets.push_back(m.name);
    targets.push_back(m.name + ".rollout");
  }
  const auto& ranges = c.placement.ranges;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const RankRange& r = ranges[i];
    std::string path = "placement.ranges." + r.target;
    if (std::find(targets.begin(), targets.end(), r.target) == targets.end())
      diag.error(c.pos(path), path, "no model role '" + r.target + "' (ranges name a role or ROLE.rollout)",
                 name_fix(r.target, targets, "models"));
    if (opt.world > 0 && r.last >= opt.world)
      diag.error(c.pos(path), path,
                 "ranks [" + std::to_string(r.first) + ", " + std::to_string(r.last) + "] exceed the world of " +
                     std::to_string(opt.world) + " ranks (0.." + std::to_string(opt.world - 1) + ")",
                 "shrink the range or run with more ranks");
    for (size_t j = 0; j < i; ++j) {
      const bool same = r.first == ranges[j].first && r.last == ranges[j].last;  // shared exactly: time-sliced
      if (!same && r.first <= ranges[j].last && ranges[j].first <= r.last)
        diag.error(c.pos(path), path,
                   "ranks [" + std::to_string(r.first) + ", " + std::to_string(r.last) + "] partly overlap '" +
                       ranges[j].target + "' [" + std::to_string(ranges[j].first) + ", " +
                       std::to_string(ranges[j].last) + "]",
                   "give the two roles the same range (they take turns on it) or disjoint ones");
    }
  }
  if (!c.positions.count("placement.ranges")) return;  // "needs a rank range for every role" said it all
  std::set<std::string> used;
  for (const auto& st : c.stages)
    for (const auto& r : st.used_roles()) used.insert(r);
  for (const auto& m : c.models) {
    bool has = false;
    for (const auto& r : ranges) has = has || r.target == m.name;
    if (used.count(m.name) && !has)
      diag.error(c.pos("placement.ranges"), "placement.ranges." + m.name,
                 "role '" + m.name + "' is used by a stage but has no rank range",
                 "add `" + m.name + ": [FIRST, LAST]` under placement.ranges");
  }
  RankNeeds needs = ranks_needed(c);
  if (opt.world > needs.count && needs.count > 0)
    diag.warning(c.pos("placement.ranges"), "placement.ranges",
                 "ranks " + std::to_string(needs.count) + ".." + std::to_string(opt.world - 1) + " belong to no role",
                 "run with " + std::to_string(needs.count) + " ranks or widen the ranges");
}

// LoRA adapts a role that a stage trains, on its dense projections: MoE
// experts have no adapter path yet.
void check_lora(const PipelineConfig& c, const ModelConfig& m, Diagnostics& diag) {
  if (!m.lora.enabled()) return;
  const std::string path = "models." + m.name + ".lora";
  bool trained = false;
  for (const auto& st : c.stages)
    for (const auto& r : st.trained_roles()) trained = trained || r == m.name;
  if (m.frozen || !trained)
    diag.error(c.pos(path), path, "role '" + m.name + "' is not trained by any stage, so its adapters would stay zero",
               "remove `lora`, or put it on the role a stage trains");
  const bool moe = m.arch && m.arch->num_experts > 0;
  for (const auto& t : m.lora.targets)
    if (moe && (t == "gate_proj" || t == "up_proj" || t == "down_proj"))
      diag.error(c.pos(path + ".targets"), path + ".targets",
                 "'" + t + "': adapters on MoE experts are not built (role '" + m.name + "' is a mixture of experts)",
                 "target the attention projections only (q_proj, k_proj, v_proj, o_proj)");
}

// CUDA graphs replay on a CUDA device only; `fixed` is the same step run eagerly anywhere.
void check_decode_step(const PipelineConfig& c, const ModelConfig& m, Diagnostics& diag) {
  if (m.rollout.decode_step != DecodeStep::graphs || c.run.device == Device::cuda) return;
  const std::string path = "models." + m.name + ".rollout.decode_step";
  diag.error(c.pos(path), path, "graphs are CUDA graphs, and run.device is " + to_string(c.run.device),
             "set run.device: cuda, or decode_step: fixed to run the same fixed-shape step eagerly on the CPU");
}

void report_layout(const PipelineConfig& c, const std::string& base, const ParallelConfig& p, int64_t ranks,
                   const ModelDims* dims, const std::string& role, Diagnostics& diag) {
  for (const auto& prob : check_layout(p, ranks, dims)) {
    std::string path = prob.key.empty() ? base : base + "." + prob.key;
    diag.error(c.pos(path), path, "role '" + role + "': " + prob.message, prob.fix);
  }
}

}  // namespace

void validate_models(PipelineConfig& c, const ValidateOptions& opt, Diagnostics& diag) {
  check_from_refs(c, diag);
  resolve_arch(c, opt, diag);
  resolve_tokenizers(c, opt, diag);
  check_placement(c, opt, diag);
  bool colocated = c.placement.mode == PlacementMode::colocated;
  for (const auto& m : c.models) {
    std::optional<ModelDims> dims;
    if (m.arch) dims = m.arch->dims();
    const ModelDims* d = dims ? &*dims : nullptr;
    int64_t ranks = colocated ? opt.world : ranks_of(c, m.name, opt.world).count;
    int64_t rollout_ranks = colocated ? opt.world : ranks_of(c, m.name + ".rollout", opt.world).count;
    std::string base = "models." + m.name;
    report_layout(c, base + ".parallel", m.parallel, ranks, d, m.name, diag);
    check_lora(c, m, diag);
    check_decode_step(c, m, diag);
    // An inherited rollout layout on the same ranks has the training layout's problems: report them once.
    bool rollout_given = false;
    for (const auto& [path, pos] : c.positions) rollout_given = rollout_given || str::starts_with(path, base + ".rollout.parallel.");
    if (rollout_given || rollout_ranks != ranks)
      report_layout(c, base + ".rollout.parallel", m.rollout.parallel, rollout_ranks, d, m.name + ".rollout", diag);
  }
}

}  // namespace hpcrl::config
