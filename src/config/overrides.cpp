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

// The walk down the tree to where an override goes: the node reached and its path (for messages).
struct Walk {
  YNode* cur;
  std::string walked;
  const SourcePos& at;
  Diagnostics& diag;
};

// Into item `index` of the list at w.cur (index == size appends one). False after reporting why not.
bool into_item(Walk& w, long index) {
  if (!w.cur->is_seq()) {
    w.diag.error(w.at, w.walked,
                 "is " + w.cur->describe() + ", not a list, so [" + std::to_string(index) + "] addresses nothing",
                 "address a key of it instead");
    return false;
  }
  size_t n = w.cur->items.size();
  if (static_cast<size_t>(index) > n) {
    w.diag.error(w.at, w.walked,
                 "has " + std::to_string(n) + " items; index " + std::to_string(index) + " is out of range",
                 "use an index below " + std::to_string(n) + " (or " + std::to_string(n) + " to append)");
    return false;
  }
  if (static_cast<size_t>(index) == n) {
    YNode fresh;
    fresh.pos = w.at;
    w.cur->items.push_back(fresh);
  }
  w.cur = &w.cur->items[index];
  w.walked += "[" + std::to_string(index) + "]";
  return true;
}

// Into `key` of the mapping at w.cur (a null node becomes a mapping, a missing key is added); when `last`,
// the key's position becomes the override's. False after reporting why not.
bool into_key(Walk& w, const std::string& key, bool last) {
  if (w.cur->is_null()) {
    w.cur->kind = YNode::Kind::kMap;
    w.cur->pos = w.at;
  }
  if (!w.cur->is_map()) {
    w.diag.error(w.at, w.walked, "is " + w.cur->describe() + ", not a mapping, so it has no key '" + key + "'",
                 "set " + w.walked + " itself, e.g. --set " + w.walked + "=VALUE");
    return false;
  }
  YNode* next = w.cur->find(key);
  if (!next) {
    YNode fresh;
    fresh.pos = w.at;
    w.cur->entries.push_back({key, w.at, fresh});
    next = &w.cur->entries.back().value;
  } else if (last) {
    for (auto& e : w.cur->entries)
      if (e.key == key) e.key_pos = w.at;  // the value now comes from the override
  }
  w.cur = next;
  w.walked += (w.walked.empty() ? "" : ".") + key;
  return true;
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

  Walk w{&root, "", at, diag};
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (st.index >= 0) {
      if (!into_item(w, st.index)) return;
      continue;
    }
    std::string key = st.key;
    if (w.walked == "placement.ranges") {  // the rest of the path is one key: "policy.rollout"
      for (size_t j = i + 1; j < steps.size(); ++j) key += "." + steps[j].key;
      i = steps.size() - 1;
    }
    if (!into_key(w, key, i + 1 == steps.size())) return;
  }
  *w.cur = *value;
}

}  // namespace

void apply_overrides(YNode& root, const std::vector<std::string>& overrides, const std::string& file,
                     Diagnostics& diag) {
  for (const auto& arg : overrides) apply_one(root, arg, file, diag);
}

}  // namespace hpcrl::config
