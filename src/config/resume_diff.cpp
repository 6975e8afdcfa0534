// Resolved configs compared key by key (see resume_diff.h).
#include "hpcrl/config/resume_diff.h"

#include <yaml-cpp/yaml.h>

#include <map>

#include "hpcrl/config/render.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config {
namespace {

// Every leaf of `n` as key path → value in flow YAML; an empty map or list is a leaf too.
void flatten(const YAML::Node& n, const std::string& path, std::map<std::string, std::string>& out) {
  if (n.IsMap() && n.size() > 0) {
    for (const auto& kv : n) flatten(kv.second, path.empty() ? kv.first.as<std::string>() : path + "." + kv.first.as<std::string>(), out);
  } else if (n.IsSequence() && n.size() > 0 && !n[0].IsScalar()) {
    for (size_t i = 0; i < n.size(); ++i) flatten(n[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    YAML::Emitter e;
    e << YAML::Flow << n;
    out[path] = e.c_str();
  }
}

std::map<std::string, std::string> leaves(const PipelineConfig& c) {
  std::map<std::string, std::string> out;
  flatten(YAML::Load(to_yaml(c)), "", out);  // to_yaml's own output: no aliases, bounded
  return out;
}

// "rewards.<name>.timeout_s" matches "rewards.judge.timeout_s"; "trace.*" matches under trace.
bool matches(const std::string& pattern, const std::string& key) {
  if (str::ends_with(pattern, ".*")) return str::starts_with(key, pattern.substr(0, pattern.size() - 1));
  const auto p = str::split(pattern, '.'), k = str::split(key, '.');
  if (p.size() != k.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != k[i] && !(p[i].size() > 2 && p[i].front() == '<' && p[i].back() == '>')) return false;
  return true;
}

bool safe(const std::string& key) {
  for (const auto& p : resume_safe_keys())
    if (matches(p, key)) return true;
  return false;
}

}  // namespace

const std::vector<std::string>& resume_safe_keys() {
  static const std::vector<std::string> keys{"run.name", "run.out", "run.checkpoint_every", "run.keep_last",
                                             "run.comm_timeout_s", "run.check_memory", "trace.*", "rewards.<name>.timeout_s"};
  return keys;
}

std::vector<ConfigDifference> resume_differences(const PipelineConfig& saved, const PipelineConfig& now) {
  const auto a = leaves(saved), b = leaves(now);
  std::vector<ConfigDifference> out;
  auto ia = a.begin();
  auto ib = b.begin();
  const std::string absent = "(absent)";
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      if (!safe(ia->first)) out.push_back({ia->first, ia->second, absent});
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      if (!safe(ib->first)) out.push_back({ib->first, absent, ib->second});
      ++ib;
    } else {
      if (ia->second != ib->second && !safe(ia->first)) out.push_back({ia->first, ia->second, ib->second});
      ++ia;
      ++ib;
    }
  }
  return out;
}

std::string describe(const std::vector<ConfigDifference>& diffs, size_t shown) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < diffs.size() && i < shown; ++i)
    parts.push_back(diffs[i].key + " (saved " + diffs[i].saved + ", now " + diffs[i].now + ")");
  std::string out = str::join(parts, ", ");
  if (diffs.size() > shown) out += " and " + std::to_string(diffs.size() - shown) + " more";
  return out;
}

}  // namespace hpcrl::config
