// Scalar codecs of the schema (schema.h): integers, numbers, booleans, strings
// and names, with the strict YAML reading the pipeline file promises — a
// quoted "200" is a string, not a number; `yes` is not a boolean; 1.5 is not an
// integer; inf/nan are not learning rates — and the messages that say so.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cctype>

#include "config/foreign_keys.h"
#include "config/schema.h"

namespace hpcrl::config::schema {

namespace {

bool is_int_text(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

bool is_number_text(const std::string& s) {
  if (s.empty()) return false;
  bool digit = false;
  for (char ch : s) {
    if (ch >= '0' && ch <= '9') digit = true;
    else if (ch != '+' && ch != '-' && ch != '.' && ch != 'e' && ch != 'E') return false;
  }
  return digit;
}

// Scalar type errors share one shape: "expected <type>, got <what>; <fix>".
bool type_error(const YNode& n, const std::string& path, Reading& reading, const std::string& type, const std::string& fix) {
  std::string f = n.is_scalar() && n.quoted ? "remove the quotes" : fix;
  reading.error(n.pos, path, "expected " + type + ", got " + n.describe(), f);
  return false;
}

std::string range_words(double lo, double hi, Bound lb, Bound hb) {
  bool has_lo = lo != -HUGE_VAL, has_hi = hi != HUGE_VAL;
  if (has_lo && has_hi)
    return std::string("in ") + (lb == Bound::kOpen ? "(" : "[") + format_number(lo) + ", " + format_number(hi) +
           (hb == Bound::kOpen ? ")" : "]");
  if (has_lo) return (lb == Bound::kOpen ? "> " : "≥ ") + format_number(lo);
  if (has_hi) return (hb == Bound::kOpen ? "< " : "≤ ") + format_number(hi);
  return "";
}

}  // namespace

std::string format_number(double v) {  // shortest round-trip form
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  return s;
}

Codec<int64_t> integer(int64_t lo, int64_t hi) {
  Codec<int64_t> c;
  std::string range;
  if (hi == kNoMax) range = "≥ " + std::to_string(lo);
  else range = "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  c.type = "an integer" + (range.empty() ? "" : " " + range);
  c.read = [lo, hi, type = c.type, range](const YNode& n, const std::string& path, Reading& reading, int64_t& out) {
    if (!n.is_scalar() || n.quoted || !is_int_text(n.scalar))
      return type_error(n, path, reading, type, "write a whole number without quotes");
    errno = 0;
    long long v = std::strtoll(n.scalar.c_str(), nullptr, 10);
    if (errno == ERANGE || v < lo || v > hi) {
      reading.error(n.pos, path, "must be " + range + " (got " + n.scalar + ")", "use a value " + range);
      return false;
    }
    out = v;
    return true;
  };
  c.write = [](const int64_t& v) { return YNode::scalar_node(std::to_string(v)); };
  return c;
}

Codec<double> number(double lo, double hi, Bound lb, Bound hb) {
  Codec<double> c;
  std::string range = range_words(lo, hi, lb, hb);
  c.type = "a number" + (range.empty() ? "" : " " + range);
  c.read = [=, type = c.type](const YNode& n, const std::string& path, Reading& reading, double& out) {
    if (!n.is_scalar() || n.quoted || !is_number_text(n.scalar))
      return type_error(n, path, reading, type, "write a number like 0.5 or 1e-5, without quotes");
    char* end = nullptr;
    double v = std::strtod(n.scalar.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v))
      return type_error(n, path, reading, type, "write a finite number like 0.5 or 1e-5");
    bool below = lb == Bound::kOpen ? v <= lo : v < lo;
    bool above = hb == Bound::kOpen ? v >= hi : v > hi;
    if (below || above) {
      reading.error(n.pos, path, "must be " + range + " (got " + n.scalar + ")", "use a value " + range);
      return false;
    }
    out = v;
    return true;
  };
  c.write = [](const double& v) { return YNode::scalar_node(format_number(v)); };
  return c;
}

Codec<bool> boolean() {
  Codec<bool> c;
  c.type = "true or false";
  c.read = [](const YNode& n, const std::string& path, Reading& reading, bool& out) {
    static const std::vector<std::string> yes{"true", "True", "TRUE"}, no{"false", "False", "FALSE"};
    if (n.is_scalar() && !n.quoted) {
      for (const auto& w : yes)
        if (n.scalar == w) return out = true, true;
      for (const auto& w : no)
        if (n.scalar == w) return out = false, true;
    }
    return type_error(n, path, reading, "true or false", "write true or false");
  };
  c.write = [](const bool& v) { return YNode::scalar_node(v ? "true" : "false"); };
  return c;
}

// Would this text, written plainly, read back as something other than a string?
bool needs_quotes(const std::string& s) {
  static const std::vector<std::string> words{"~", "null", "Null", "NULL", "true", "True", "TRUE",
                                              "false", "False", "FALSE"};
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) ||
      std::isspace(static_cast<unsigned char>(s.back())))
    return true;
  for (const auto& w : words)
    if (s == w) return true;
  return is_number_text(s);
}

YNode string_node(const std::string& s) { return YNode::scalar_node(s, needs_quotes(s)); }

Codec<std::string> text(bool allow_empty) {
  Codec<std::string> c;
  c.type = allow_empty ? "a string" : "a non-empty string";
  c.read = [allow_empty, type = c.type](const YNode& n, const std::string& path, Reading& reading, std::string& out) {
    if (!n.is_scalar()) return type_error(n, path, reading, type, "write a single string");
    if (!allow_empty && n.scalar.empty()) {
      reading.error(n.pos, path, "must not be empty", "give a value or remove the key");
      return false;
    }
    out = n.scalar;
    return true;
  };
  c.write = [](const std::string& s) { return string_node(s); };
  return c;
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-')) return false;
  return true;
}

Codec<std::string> name_ref() {
  Codec<std::string> c;
  c.type = "a name (letters, digits, _ and -)";
  c.read = [type = c.type](const YNode& n, const std::string& path, Reading& reading, std::string& out) {
    if (!n.is_scalar() || n.scalar.empty()) return type_error(n, path, reading, type, "write the name");
    out = n.scalar;  // whether it names something that exists is checked once everything is read
    return true;
  };
  c.write = [](const std::string& s) { return string_node(s); };
  return c;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  std::string guess = str::closest(word, candidates);
  if (guess.empty()) return "";
  size_t best = str::edit_distance(word, guess);
  for (const auto& c : candidates)
    if (c != guess && str::edit_distance(word, c) == best) return "";  // a tie: no honest guess
  return guess;
}

std::string unknown_key(Reading& reading, const SourcePos& pos, const std::string& path, const std::string& key,
                        const std::vector<std::string>& valid) {
  // Keys users bring from DeepSpeed and FSDP for features hpcrl does not have: say so instead of "unknown".
  if (key == "offload" || key == "offload_optimizer" || key == "offload_param") {
    reading.error(pos, path, "'" + key + "': CPU offload (optimizer state or parameters in host memory) is not built",
                  "remove it; shard the state over data parallelism instead with optim.zero: 2 or 3 (docs/zero.md)");
    return "";
  }
  // A key of veRL, TRL, OpenRLHF, ... (config/foreign_keys.h): name hpcrl's key for it, wherever it lives.
  if (auto hint = foreign_key_hint(path)) {
    reading.error(pos, path, "unknown key '" + key + "'", hint->fix);
    return hint->sibling;
  }
  std::string guess = suggestion(key, valid);
  reading.error(pos, path, "unknown key '" + key + "'",
            guess.empty() ? "valid keys here: " + str::join(valid, ", ") : "did you mean '" + guess + "'?");
  return guess;
}

std::string mapping_form(const std::string& path, const YNode& scalar, const std::string& key) {
  if (key.empty() || !scalar.is_scalar() || path.empty()) return "";
  const size_t dot = path.rfind('.');
  const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
  return "write the mapping form `" + name + ": {" + key + ": " + scalar.scalar + "}`";
}

void unknown_word(Reading& reading, const SourcePos& pos, const std::string& path, const std::string& word,
                  const std::vector<std::string>& valid, const std::string& what) {
  std::string guess = suggestion(word, valid);
  std::string list = valid.empty() ? "none are defined" : "one of " + str::join(valid, ", ");
  reading.error(pos, path, "unknown " + what + " '" + word + "'",
            guess.empty() ? "use " + list : "did you mean '" + guess + "'? (" + list + ")");
}

}  // namespace hpcrl::config::schema
