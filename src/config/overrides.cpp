// `--set a.b.c=value` overrides (loader.h): each is grafted onto the YAML tree
// before decoding, so it is typed and validated by exactly the same schema as
// the file and every value it brings carries "--set a.b.c=value" as its
// position. Paths address list items as `stages[1]` or `stages.1`; rank-range
// keys contain a dot themselves (`placement.ranges.policy.rollout=[4,7]`), so
// below placement.ranges the rest of the path is one key.
#include <cctype>

#include "config/passes.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config {

namespace {

struct Step {
  std::string key;   // a mapping key, or
  long index = -1;   // a list index
};

// Digits only, and short enough to be an index (longer is no list anyone has).
bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "stages[1].grpo.clip" -> stages, 1, grpo, clip. False on a malformed path.
bool parse_path(const std::string& path, std::vector<Step>& steps) {
  for (const auto& part : str::split(path, '.')) {
    std::string key = part;
    std::vector<long> indices;
    while (!key.empty() && key.back() == ']') {
      size_t open = key.rfind('[');
      if (open == std::string::npos || !all_digits(key.substr(open + 1, key.size() - open - 2))) return false;
      indices.insert(indices.begin(), std::stol(key.substr(open + 1, key.size() - open - 2)));
      key = key.substr(0, open);
    }
    if (key.empty() && indices.empty()) return false;
    if (!key.empty()) {
      if (key.find_first_of("[]") != std::string::npos) return false;
      steps.push_back(all_digits(key) ? Step{"", std::stol(key)} : Step{key, -1});
    }
    for (long i : indices) steps.push_back({"", i});
  }
  return !steps.empty();
}

void apply_one(YNode& root, const std::string& arg, const std::string& file, Diagnostics& diag) {
  SourcePos at;
  at.file = file;
  at.set_arg = "--set " + arg;
  size_t eq = arg.find('=');
  std::string path = eq == std::string::npos ? arg : str::trim(arg.substr(0, eq));
  std::vector<Step> steps;
  if (eq == std::string::npos || !parse_path(path, steps)) {
    diag.error(at, "", "expected KEY.PATH=VALUE", "write e.g. --set stages[0].sft.steps=100 or --set run.seed=3");
    return;
  }
  auto value = parse_yaml_text(arg.substr(eq + 1), file, diag, at.set_arg);
  if (!value) return;

  YNode* cur = &root;
  std::string walked;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (st.index >= 0) {
      if (!cur->is_seq()) {
        diag.error(at, walked, "is " + cur->describe() + ", not a list, so [" + std::to_string(st.index) + "] addresses nothing",
                   "address a key of it instead");
        return;
      }
      size_t n = cur->items.size();
      if (static_cast<size_t>(st.index) > n) {
        diag.error(at, walked, "has " + std::to_string(n) + " items; index " + std::to_string(st.index) + " is out of range",
                   "use an index below " + std::to_string(n) + " (or " + std::to_string(n) + " to append)");
        return;
      }
      if (static_cast<size_t>(st.index) == n) {
        YNode fresh;
        fresh.pos = at;
        cur->items.push_back(fresh);
      }
      cur = &cur->items[st.index];
      walked += "[" + std::to_string(st.index) + "]";
      continue;
    }
    std::string key = st.key;
    if (walked == "placement.ranges") {  // the rest of the path is one key: "policy.rollout"
      for (size_t j = i + 1; j < steps.size(); ++j) key += "." + steps[j].key;
      i = steps.size() - 1;
    }
    if (cur->is_null()) {
      cur->kind = YNode::Kind::kMap;
      cur->pos = at;
    }
    if (!cur->is_map()) {
      diag.error(at, walked, "is " + cur->describe() + ", not a mapping, so it has no key '" + key + "'",
                 "set " + walked + " itself, e.g. --set " + walked + "=VALUE");
      return;
    }
    YNode* next = cur->find(key);
    if (!next) {
      YNode fresh;
      fresh.pos = at;
      cur->entries.push_back({key, at, fresh});
      next = &cur->entries.back().value;
    } else if (i + 1 == steps.size()) {
      for (auto& e : cur->entries)
        if (e.key == key) e.key_pos = at;  // the value now comes from the override
    }
    cur = next;
    walked += (walked.empty() ? "" : ".") + key;
  }
  *cur = *value;
}

}  // namespace

void apply_overrides(YNode& root, const std::vector<std::string>& overrides, const std::string& file,
                     Diagnostics& diag) {
  for (const auto& arg : overrides) apply_one(root, arg, file, diag);
}

}  // namespace hpcrl::config
