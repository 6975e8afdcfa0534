// A loaded pipeline shown back (render.h): resolved YAML through the same
// schema that read it (so what is written reads back identically), and the
// summary `hpcrl validate` prints.
#include "hpcrl/config/render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "config/schema_sections.h"
#include "hpcrl/config/layout.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config {

std::string to_yaml(const PipelineConfig& config) {
  std::string head = "# " + config.file + " with defaults and --set overrides resolved (written by hpcrl)\n";
  return head + emit_yaml(schema::pipeline_codec().write(config));
}

namespace {

std::string count(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (n >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

std::string layout(const ParallelConfig& p, int64_t ranks) {
  std::string s = "tp" + std::to_string(p.tp) + " sp" + std::to_string(p.sp) + " ep" + std::to_string(p.ep) + " pp" +
                  std::to_string(p.pp);
  int64_t dp = data_parallel_degree(p, ranks);
  return s + (dp > 0 ? " dp" + std::to_string(dp) : "");
}

std::string source(const ModelConfig& m) {
  switch (m.init.kind) {
    case InitKind::preset: return "preset " + m.init.preset;
    case InitKind::path: return m.init.path + (m.weights_present ? "" : " (no weights yet)");
    case InitKind::from: return "from " + m.init.from;
  }
  return "";
}

std::string arch(const ModelConfig& m) {
  if (!m.arch) return "";
  const ModelArch& a = *m.arch;
  std::string s = a.family + " " + std::to_string(a.num_layers) + "L d" + std::to_string(a.hidden_size) + " " +
                  std::to_string(a.num_heads) + "/" + std::to_string(a.num_kv_heads) + " heads";
  if (a.num_experts > 0) s += " " + std::to_string(a.num_experts) + " experts";
  return s + ", " + count(static_cast<double>(a.num_parameters())) + " params";
}

std::string early_stop_note(double target) {
  return target > 0 ? ", or until held-out accuracy " + schema::format_number(target) : "";
}

// ", tools: a+b (up to N calls)" for a stage with tools; "" without.
std::string tools_note(const StageTools& t) {
  if (!t.enabled()) return "";
  return ", tools: " + str::join(t.use, "+") + " (up to " + std::to_string(t.max_turns) + " calls)";
}

std::string stage_line(const SftStage& s) {
  std::ostringstream os;
  os << s.model << " on " << s.data << ": " << s.steps << " steps x batch " << s.batch << ", lr "
     << schema::format_number(s.train.lr) << early_stop_note(s.stop_at_accuracy) << tools_note(s.tools);
  return os.str();
}

// `critic`: PPO's, null for GRPO.
std::string rl_line(const RlStage& s, const std::string* critic) {
  std::ostringstream os;
  std::vector<std::string> with;
  if (!s.reference.empty()) with.push_back("reference: " + s.reference);
  if (critic) with.push_back("critic: " + *critic);
  os << s.policy << (with.empty() ? "" : " (" + str::join(with, ", ") + ")") << " on " << s.data << ", reward " << str::join(s.rewards, "+") << ": " << s.iterations << " iterations x "
     << s.prompts << " prompts x " << s.group << ", max " << s.sampling.max_new_tokens << " new tokens"
     << early_stop_note(s.stop_at_accuracy) << tools_note(s.tools);
  return os.str();
}

std::string stage_line(const GrpoStage& s) { return rl_line(s, nullptr); }
std::string stage_line(const PpoStage& s) { return rl_line(s, &s.critic); }

std::string stage_line(const DistillStage& s) {
  std::ostringstream os;
  os << s.teacher << " -> " << s.student << " on " << s.data << ": " << to_string(s.loss) << ", " << s.steps
     << " steps x batch " << s.batch << (s.on_policy ? ", on-policy" : "") << early_stop_note(s.stop_at_accuracy);
  return os.str();
}

std::string stage_line(const StageConfig& st) {
  return std::visit([](const auto& s) { return stage_line(s); }, st.body);
}

}  // namespace

std::string summarize(const PipelineConfig& c, const ValidateOptions& opt) {
  std::ostringstream os;
  os << c.file << ": valid\n";
  os << "run: " << c.run.name << " -> " << c.run.out << " (" << to_string(c.run.device) << ", "
     << to_string(c.run.dtype) << ", seed " << c.run.seed << ")\n";
  size_t w = 4;
  for (const auto& m : c.models) w = std::max(w, m.name.size());
  os << "models:\n";
  for (const auto& m : c.models) {
    const RankSpan train = ranks_of(c, m.name, opt.world), gen = ranks_of(c, m.name + ".rollout", opt.world);
    os << "  " << m.name << std::string(w - m.name.size() + 2, ' ') << source(m);
    std::string a = arch(m);
    if (!a.empty()) os << " [" << a << "]";
    const ParallelConfig &t = m.parallel, &g = m.rollout.parallel;
    const bool same = t.tp == g.tp && t.sp == g.sp && t.ep == g.ep && t.pp == g.pp && train.count == gen.count &&
                      train.first == gen.first;
    // Disaggregated: the role -> ranks map (`hpcrl plan` adds groups and memory).
    auto on = [&](const RankSpan& r) {
      if (c.placement.mode != PlacementMode::disaggregated || r.count == 0) return std::string();
      return " on ranks " + std::to_string(r.first) + "-" + std::to_string(r.first + r.count - 1);
    };
    os << "; " << (same ? "" : "train ") << layout(t, train.count) << on(train);
    if (!same) os << ", rollout " << layout(g, gen.count) << on(gen);
    if (m.head == Head::value) os << ", value head";
    if (m.frozen) os << ", frozen";
    os << "\n";
  }
  os << "stages:\n";
  for (size_t i = 0; i < c.stages.size(); ++i) {
    std::string kind = to_string(c.stages[i].kind());
    os << "  " << i << ". " << kind << std::string(9 - kind.size(), ' ') << stage_line(c.stages[i]) << "\n";
  }
  RankNeeds needs = ranks_needed(c);
  os << "placement: " << to_string(c.placement.mode) << "; ranks needed: "
     << (needs.exact ? "exactly " : "a multiple of ") << needs.count;
  if (opt.world > 0) os << " (checked for --world " << opt.world << ")";
  os << "\n";
  return os.str();
}

}  // namespace hpcrl::config
