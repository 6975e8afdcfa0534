// The schema machinery: a Codec<T> knows how to read a T out of a YNode
// (reporting every problem with its position and key path instead of stopping),
// how to write a T back as a YNode (config.resolved.yaml), and which key paths
// exist below it (so a test can prove docs/config.md documents every key).
// Sections (schema_*.cpp) declare their structs field by field with these
// builders; nothing else in the loader knows a key name.
//
//   structure<SftStage>({"sft stage", {
//       field<SftStage>("steps", [](auto& s) -> auto& { return s.steps; }, integer(1), kRequired), ...}})
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/yaml_node.h"
#include "hpcrl/config/enums.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config::schema {

// One document being read: where its errors go and where each key was written.
struct Reading {
  Diagnostics& diag;
  std::map<std::string, SourcePos>& positions;      // key path -> value position
  std::map<std::string, SourcePos> key_positions;   // key path -> position of the key itself

  void error(const SourcePos& pos, const std::string& path, const std::string& msg, const std::string& fix) {
    diag.error(pos, path, msg, fix);
  }
  // Where the key / the value at `path` was written; `fallback` when it was not.
  SourcePos key_pos(const std::string& path, const SourcePos& fallback) const {
    auto it = key_positions.find(path);
    return it != key_positions.end() ? it->second : fallback;
  }
  SourcePos value_pos(const std::string& path, const SourcePos& fallback) const {
    auto it = positions.find(path);
    return it != positions.end() ? it->second : fallback;
  }
};

inline std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// An error about `key` of the mapping `map` at `path`, reported at the key.
inline void error_at_key(Reading& reading, const YNode& map, const std::string& path, const std::string& key,
                         const std::string& message, const std::string& fix) {
  std::string kp = join_path(path, key);
  reading.error(reading.key_pos(kp, map.pos), kp, message, fix);
}

using KeyLister = std::function<void(const std::string& prefix, std::vector<std::string>& out)>;

template <class T>
struct Codec {
  std::string type;  // how messages and docs name the expected value: "an integer ≥ 1"
  // Reads `node` into `out`; on a problem reports it and returns false (out keeps its default).
  std::function<bool(const YNode& node, const std::string& path, Reading& reading, T& out)> read;
  std::function<YNode(const T&)> write;
  KeyLister keys;  // nested key paths (mappings only)
};

// --- scalars (schema_scalars.cpp) --------------------------------------------

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
Codec<int64_t> integer(int64_t lo, int64_t hi = kNoMax);
enum class Bound { kClosed, kOpen };
Codec<double> number(double lo, double hi, Bound lo_bound = Bound::kClosed, Bound hi_bound = Bound::kClosed);
Codec<bool> boolean();
Codec<std::string> text(bool allow_empty = false);
// A name other sections refer to (role, dataset, reward): letters, digits, _ and -.
Codec<std::string> name_ref();
bool valid_name(const std::string& s);
std::string format_number(double v);  // shortest text that reads back to exactly v
YNode string_node(const std::string& s);  // quoted when a plain scalar would read back as something else

// "unknown key 'x'; did you mean 'y'?" (or the list of valid keys). Returns the suggestion ("" if none).
std::string unknown_key(Reading& reading, const SourcePos& pos, const std::string& path, const std::string& key,
                 const std::vector<std::string>& valid);
// "unknown value 'x' ...; did you mean 'y'? (one of ...)".
// A suggestion is made only when one candidate is closer than all others.
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates);
void unknown_word(Reading& reading, const SourcePos& pos, const std::string& path, const std::string& word,
                  const std::vector<std::string>& valid, const std::string& what);

// --- enums, lists ------------------------------------------------------------

template <class E>
Codec<E> enumeration() {
  Codec<E> c;
  c.type = "one of " + str::join(names_of<E>(), ", ");
  c.read = [type = c.type](const YNode& n, const std::string& path, Reading& reading, E& out) {
    if (!n.is_scalar()) {
      reading.error(n.pos, path, "expected " + type + ", got " + n.describe(), "write one of these words");
      return false;
    }
    auto e = parse_enum<E>(n.scalar);
    if (!e) {
      unknown_word(reading, n.pos, path, n.scalar, names_of<E>(), "value");
      return false;
    }
    out = *e;
    return true;
  };
  c.write = [](const E& e) { return YNode::scalar_node(to_string(e)); };
  return c;
}

// A list of T; `scalar_ok` also accepts a single T as a one-element list.
template <class T>
Codec<std::vector<T>> list_of(Codec<T> elem, size_t min_len = 0, size_t max_len = SIZE_MAX, bool scalar_ok = false) {
  Codec<std::vector<T>> c;
  std::string bounds = min_len == max_len ? "exactly " + std::to_string(min_len)
                       : max_len == SIZE_MAX ? (min_len ? "at least " + std::to_string(min_len) : "")
                                             : std::to_string(min_len) + " to " + std::to_string(max_len);
  c.type = "a list of " + (bounds.empty() ? "" : bounds + " ") + "values (each " + elem.type + ")";
  c.read = [elem, min_len, max_len, scalar_ok, type = c.type](const YNode& n, const std::string& path, Reading& reading,
                                                             std::vector<T>& out) {
    std::vector<const YNode*> items;
    if (n.is_seq()) {
      for (const auto& item : n.items) items.push_back(&item);
    } else if (scalar_ok && n.is_scalar()) {
      items.push_back(&n);
    } else {
      reading.error(n.pos, path, "expected " + type + ", got " + n.describe(), "write a list like [a, b]");
      return false;
    }
    if (items.size() < min_len || items.size() > max_len) {
      reading.error(n.pos, path, "expected " + type + ", got " + std::to_string(items.size()) + " values",
                "give " + (min_len == max_len ? "exactly " + std::to_string(min_len)
                                              : std::to_string(min_len) + (max_len == SIZE_MAX ? " or more"
                                                                             : " to " + std::to_string(max_len))) +
                    " values");
      return false;
    }
    std::vector<T> values(items.size());
    bool ok = true;
    for (size_t i = 0; i < items.size(); ++i)
      ok = elem.read(*items[i], path + "[" + std::to_string(i) + "]", reading, values[i]) && ok;
    if (ok) out = std::move(values);
    return ok;
  };
  c.write = [elem](const std::vector<T>& v) {
    YNode seq = YNode::seq_node();
    for (const auto& x : v) seq.items.push_back(elem.write(x));
    return seq;
  };
  return c;
}

// --- mappings ----------------------------------------------------------------

template <class S>
struct Field {
  std::string name;
  bool required = false;
  std::string type;
  std::function<bool(S&, const YNode&, const std::string&, Reading&)> read;
  std::function<YNode(const S&)> write;
  std::function<bool(const S&)> applies;  // written to YAML only when this says so (unset: always)
  KeyLister keys;
};

constexpr bool kRequired = true;

// `get` is a generic accessor `[](auto& s) -> auto& { return s.member; }` (works on const S too).
template <class S, class T, class Get>
Field<S> field(std::string name, Get get, Codec<T> codec, bool required = false) {
  Field<S> f;
  f.name = std::move(name);
  f.required = required;
  f.type = codec.type;
  f.read = [get, read = codec.read](S& s, const YNode& n, const std::string& p, Reading& reading) {
    return read(n, p, reading, get(s));
  };
  f.write = [get, write = codec.write](const S& s) { return write(get(s)); };
  f.keys = codec.keys;
  return f;
}

template <class S>
Field<S> only_if(Field<S> f, std::function<bool(const S&)> applies) {
  f.applies = std::move(applies);
  return f;
}

template <class S>
struct StructSpec {
  std::string what;  // "the sft stage", for messages
  std::vector<Field<S>> fields;
  // Cross-field checks after all fields were read (`node` is the mapping, for positions).
  std::function<void(S&, const YNode& node, const std::string& path, Reading&)> check;
  // The key a lone scalar in place of the mapping means (`kl: 0.001` is `kl: {coef: 0.001}`); unset: the
  // only field, when there is one.
  std::string scalar_key;
};

// "write `kl: {coef: 0.001}`" for a scalar where a mapping with an obvious key belongs, else "".
std::string mapping_form(const std::string& path, const YNode& scalar, const std::string& key);

template <class S>
Codec<S> structure(StructSpec<S> spec_in) {
  auto spec = std::make_shared<const StructSpec<S>>(std::move(spec_in));
  std::vector<std::string> names;
  for (const auto& f : spec->fields) {
    if (std::find(names.begin(), names.end(), f.name) != names.end())
      throw std::logic_error("config schema: key '" + f.name + "' declared twice in " + spec->what);
    names.push_back(f.name);
  }
  Codec<S> c;
  c.type = "a mapping with keys " + str::join(names, ", ");
  c.read = [spec, names](const YNode& n, const std::string& path, Reading& reading, S& out) {
    if (!n.is_map() && !n.is_null()) {
      const std::string obvious = !spec->scalar_key.empty() ? spec->scalar_key : names.size() == 1 ? names[0] : "";
      const std::string form = mapping_form(path, n, obvious);
      reading.error(n.pos, path, "expected a mapping (" + spec->what + "), got " + n.describe(),
                    form.empty() ? "write `key: value` entries; valid keys: " + str::join(names, ", ")
                                 : form + " (valid keys: " + str::join(names, ", ") + ")");
      return false;
    }
    bool ok = true;
    std::vector<std::string> suggested;  // required keys an unknown key probably meant
    for (const auto& e : n.entries) {
      std::string kp = join_path(path, e.key);
      const Field<S>* f = nullptr;
      for (const auto& cand : spec->fields)
        if (cand.name == e.key) f = &cand;
      if (!f) {
        suggested.push_back(unknown_key(reading, e.key_pos, kp, e.key, names));
        ok = false;
        continue;
      }
      reading.positions[kp] = e.value.pos;
      reading.key_positions[kp] = e.key_pos;
      ok = f->read(out, e.value, kp, reading) && ok;
    }
    for (const auto& f : spec->fields) {
      if (!f.required || n.find(f.name)) continue;
      ok = false;
      // `stepz: 10` already says "did you mean 'steps'?": a second error for steps is noise.
      if (std::find(suggested.begin(), suggested.end(), f.name) != suggested.end()) continue;
      bool long_type = f.type.find('`') != std::string::npos;
      std::string where = path.empty() ? "the top level" : path;
      reading.error(reading.key_pos(path, n.pos), join_path(path, f.name), "missing required key",
                long_type ? "add a `" + f.name + ":` key to " + where + ": " + f.type
                          : "add `" + f.name + ": <" + f.type + ">` to " + where);
    }
    if (spec->check) spec->check(out, n, path, reading);
    return ok;
  };
  c.write = [spec](const S& s) {
    YNode m = YNode::map_node();
    for (const auto& f : spec->fields)
      if (!f.applies || f.applies(s)) m.entries.push_back({f.name, {}, f.write(s)});
    return m;
  };
  c.keys = [spec](const std::string& prefix, std::vector<std::string>& out) {
    for (const auto& f : spec->fields) {
      std::string kp = join_path(prefix, f.name);
      out.push_back(kp);
      if (f.keys) f.keys(kp, out);
    }
  };
  return c;
}

// `name: {...}` entries whose keys are user-chosen names (models, rewards, data).
// S has a `name` member. `placeholder` names the key in docs ("<role>").
template <class S>
Codec<std::vector<S>> named_map(Codec<S> elem, std::string what, std::string placeholder) {
  Codec<std::vector<S>> c;
  c.type = "a mapping of " + what + " names to their settings";
  c.read = [elem, what](const YNode& n, const std::string& path, Reading& reading, std::vector<S>& out) {
    if (!n.is_map()) {
      reading.error(n.pos, path, "expected " + std::string("a mapping of ") + what + " names, got " + n.describe(),
                "write `name: {...}` entries, one per " + what);
      return false;
    }
    bool ok = true;
    for (const auto& e : n.entries) {
      std::string kp = join_path(path, e.key);
      reading.positions[kp] = e.value.pos;
      reading.key_positions[kp] = e.key_pos;
      if (!valid_name(e.key)) {
        reading.error(e.key_pos, kp, what + " name '" + e.key + "' has characters other than letters, digits, _ and -",
                  "rename it, e.g. '" + what + "_1'");
        ok = false;
        continue;
      }
      S s{};
      s.name = e.key;
      ok = elem.read(e.value, kp, reading, s) && ok;
      out.push_back(std::move(s));
    }
    return ok;
  };
  c.write = [elem](const std::vector<S>& v) {
    YNode m = YNode::map_node();
    for (const auto& s : v) m.entries.push_back({s.name, {}, elem.write(s)});
    return m;
  };
  c.keys = [elem, placeholder](const std::string& prefix, std::vector<std::string>& out) {
    std::string kp = join_path(prefix, placeholder);
    out.push_back(kp);
    if (elem.keys) elem.keys(kp, out);
  };
  return c;
}

}  // namespace hpcrl::config::schema
