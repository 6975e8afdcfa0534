// Structure of an answer (equation, union, set, interval/tuple, list, scalar)
// and the comparison built on it; the rules are in math_equivalence.h. Text
// is split at top-level separators only — outside (), [], {} and \{ \} — so
// "(1,2), (3,4)" is a list of two tuples and "f(1,2)" never splits.
#include "hpcrl/reward/math_equivalence.h"

#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "answer_braces.h"
#include "math_build.h"
#include "math_compare.h"

namespace hpcrl::reward {
namespace {

using detail::is_alpha;
using detail::is_digit;
using detail::is_space;

constexpr int kMaxStructureDepth = 4;  // e.g. a union of intervals of tuples

struct Context {
  const MathLimits& limits;
  detail::Deadline deadline;
  SymbolTable symbols;
  ExprOptions options;
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Removes \left and \right (not \leftarrow) so that "\left[1,3\right)" has its
// brackets at the ends; the parser skips the other spacing commands itself.
std::string drop_sizing(std::string s) {
  detail::remove_command(s, "\\left");
  detail::remove_command(s, "\\right");
  return s;
}

// Offsets of `sep` at bracket depth 0. With `thousands`, commas inside a
// number's thousands groups ("1,234") are not separators.
std::vector<size_t> top_level(const std::string& s, const std::string& sep, bool thousands) {
  std::vector<size_t> at;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
      depth += s[i + 1] == '{' ? 1 : -1;
      ++i;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth != 0) continue;
    if (thousands && is_digit(c) && (i == 0 || (!is_digit(s[i - 1]) && s[i - 1] != '.'))) {
      size_t end = thousands_group_end(s, i);
      if (end > i) i = end - 1;
      continue;
    }
    if (s.compare(i, sep.size(), sep) == 0) {
      bool command = is_alpha(sep.back());  // "\cup" but not "\cupdot"
      if (!command || i + sep.size() >= s.size() || !is_alpha(s[i + sep.size()])) at.push_back(i);
    }
  }
  return at;
}

std::vector<std::string> split_at(const std::string& s, const std::vector<size_t>& at, size_t sep_len) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t p : at) {
    parts.push_back(trim(s.substr(begin, p - begin)));
    begin = p + sep_len;
  }
  parts.push_back(trim(s.substr(begin)));
  return parts;
}

// True when the bracket opened at s[0] (length `open_len`) closes exactly at
// the end, i.e. the whole text is one bracketed group.
bool one_group(const std::string& s, size_t open_len, size_t close_len) {
  if (s.size() < open_len + close_len) return false;
  std::string inner = s.substr(open_len, s.size() - open_len - close_len);
  int depth = 0;
  for (size_t i = 0; i < inner.size(); ++i) {
    char c = inner[i];
    if (c == '\\' && i + 1 < inner.size() && (inner[i + 1] == '{' || inner[i + 1] == '}')) {
      depth += inner[++i] == '{' ? 1 : -1;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    }
    if (depth < 0) return false;
  }
  return depth == 0;
}

enum class Kind { kScalar, kSet, kOrdered, kList };

struct Collection {
  Kind kind = Kind::kScalar;
  char open = 0, close = 0;  // kOrdered: '(' or '[', ')' or ']'
  std::vector<std::string> members;
};

Collection collection_of(const std::string& s) {
  Collection c;
  for (const char* empty : {"\\emptyset", "\\varnothing", "\\{\\}", "\xE2\x88\x85"}) {  // ∅
    if (trim(s) == empty) {
      c.kind = Kind::kSet;
      return c;
    }
  }
  if (starts_with(s, "\\{") && ends_with(s, "\\}") && one_group(s, 2, 2)) {
    c.kind = Kind::kSet;
    std::string inner = s.substr(2, s.size() - 4);
    c.members = split_at(inner, top_level(inner, ",", false), 1);
    return c;
  }
  if (s.size() >= 2 && (s.front() == '(' || s.front() == '[') && (s.back() == ')' || s.back() == ']') &&
      one_group(s, 1, 1)) {
    std::string inner = s.substr(1, s.size() - 2);
    std::vector<size_t> commas = top_level(inner, ",", false);
    if (!commas.empty()) {
      c.kind = Kind::kOrdered;
      c.open = s.front();
      c.close = s.back();
      c.members = split_at(inner, commas, 1);
      return c;
    }
  }
  std::vector<size_t> commas = top_level(s, ",", true);
  if (!commas.empty()) {
    c.kind = Kind::kList;
    c.members = split_at(s, commas, 1);
  }
  return c;
}

bool compare(const std::string& a, const std::string& b, int depth, Context& ctx);

// Every member of `a` equals one of `b` and every member of `b` one of `a`.
bool order_free(const std::vector<std::string>& a, const std::vector<std::string>& b, int depth, Context& ctx) {
  std::vector<signed char> memo(a.size() * b.size(), -1);
  auto eq = [&](size_t i, size_t j) {
    signed char& m = memo[i * b.size() + j];
    if (m < 0) m = compare(a[i], b[j], depth + 1, ctx) ? 1 : 0;
    return m == 1;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) found = eq(i, j);
    if (!found) return false;
  }
  for (size_t j = 0; j < b.size(); ++j) {
    bool found = false;
    for (size_t i = 0; i < a.size() && !found; ++i) found = eq(i, j);
    if (!found) return false;
  }
  return true;
}

bool compare_collections(const Collection& a, const Collection& b, int depth, Context& ctx) {
  int max = ctx.limits.max_elements;
  if (static_cast<int>(a.members.size()) > max || static_cast<int>(b.members.size()) > max) return false;
  bool a_free = a.kind == Kind::kSet || a.kind == Kind::kList;
  bool b_free = b.kind == Kind::kSet || b.kind == Kind::kList;
  if (a_free && b_free) return order_free(a.members, b.members, depth, ctx);
  if (a.kind != Kind::kOrdered || b.kind != Kind::kOrdered) return false;
  if (a.open != b.open || a.close != b.close || a.members.size() != b.members.size()) return false;
  for (size_t i = 0; i < a.members.size(); ++i) {
    if (!compare(a.members[i], b.members[i], depth + 1, ctx)) return false;
  }
  return true;
}

// "x", "x_1", "a_{n}": a variable alone on the left of an equation.
bool bare_variable(const std::string& s) {
  if (s.empty() || !is_alpha(s[0])) return false;
  if (s.size() == 1) return true;
  if (s[1] != '_') return false;
  std::string sub = s.substr(2);
  if (sub.size() >= 2 && sub.front() == '{' && sub.back() == '}') sub = sub.substr(1, sub.size() - 2);
  if (sub.empty()) return false;
  for (char c : sub) {
    if (!is_alpha(c) && !is_digit(c)) return false;
  }
  return true;
}

std::optional<ParsedExpr> parse_scalar(const std::string& text, Context& ctx);

// l1 = r1 vs l2 = r2 as scalars: (l1 - r1) ∓ (l2 - r2) = 0.
bool equations_equal(const std::vector<std::string>& ea, const std::vector<std::string>& eb, Context& ctx) {
  auto l1 = parse_scalar(ea[0], ctx), r1 = parse_scalar(ea[1], ctx);
  auto l2 = parse_scalar(eb[0], ctx), r2 = parse_scalar(eb[1], ctx);
  if (!l1 || !r1 || !l2 || !r2) return false;
  ParsedExpr d1 = detail::add_expr(*l1, *r1, true), d2 = detail::add_expr(*l2, *r2, true);
  ParsedExpr zero;  // value 0
  return detail::scalars_equal(detail::add_expr(d1, d2, true), zero, ctx.symbols, ctx.limits, ctx.deadline) ||
         detail::scalars_equal(detail::add_expr(d1, d2, false), zero, ctx.symbols, ctx.limits, ctx.deadline);
}

// nullopt when neither side is an equation.
std::optional<bool> compare_equations(const std::string& a, const std::string& b, int depth, Context& ctx) {
  std::vector<size_t> at_a = top_level(a, "=", false), at_b = top_level(b, "=", false);
  if (at_a.empty() && at_b.empty()) return std::nullopt;
  if (at_a.size() > 1 || at_b.size() > 1) return false;
  std::vector<std::string> ea = split_at(a, at_a, 1), eb = split_at(b, at_b, 1);
  if (at_a.empty() || at_b.empty()) {
    const std::vector<std::string>& eq = at_a.empty() ? eb : ea;
    const std::string& other = at_a.empty() ? a : b;
    if (bare_variable(eq[0])) return compare(eq[1], other, depth + 1, ctx);
    return bare_variable(eq[1]) && compare(eq[0], other, depth + 1, ctx);  // "2x+1 = y"
  }
  if (bare_variable(ea[0]) && ea[0] == eb[0]) return compare(ea[1], eb[1], depth + 1, ctx);
  return equations_equal(ea, eb, ctx);
}

// nullopt when neither side is a union.
std::optional<bool> compare_unions(const std::string& a, const std::string& b, int depth, Context& ctx) {
  std::vector<size_t> at_a = top_level(a, "\\cup", false), at_b = top_level(b, "\\cup", false);
  if (at_a.empty() && at_b.empty()) return std::nullopt;
  if (at_a.empty() || at_b.empty()) return false;
  return order_free(split_at(a, at_a, 4), split_at(b, at_b, 4), depth, ctx);
}

// +1 / -1 for ±\infty (or ∞), 0 for anything else.
int infinity_sign(const std::string& s) {
  std::string t = s;
  int sign = 1;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    sign = t[0] == '-' ? -1 : 1;
    t = trim(t.substr(1));
  }
  return t == "\\infty" || t == "\xE2\x88\x9E" ? sign : 0;
}

// "5 cm", "2\sqrt{2} square meters" → the value before the unit words (a
// trailing run of ASCII words of two or more letters, after a space).
std::string drop_unit_words(std::string s) {
  for (;;) {
    size_t space = s.find_last_of(" \t");
    if (space == std::string::npos) return s;
    std::string word = s.substr(space + 1);
    bool unit = word.size() >= 2 && word != "pi";
    for (char c : word) unit = unit && is_alpha(c);
    std::string rest = trim(s.substr(0, space));
    if (!unit || rest.empty()) return s;
    s = rest;
  }
}

std::optional<ParsedExpr> parse_scalar(const std::string& text, Context& ctx) {
  return parse_math_expr(drop_unit_words(trim(text)), ctx.symbols, ctx.options);
}

bool compare_scalars(const std::string& a, const std::string& b, Context& ctx) {
  int ia = infinity_sign(a), ib = infinity_sign(b);
  if (ia != 0 || ib != 0) return ia == ib;
  auto pa = parse_scalar(a, ctx);
  if (!pa || ctx.deadline.expired()) return false;
  auto pb = parse_scalar(b, ctx);
  if (!pb) return false;
  return detail::scalars_equal(*pa, *pb, ctx.symbols, ctx.limits, ctx.deadline);
}

bool compare(const std::string& a_in, const std::string& b_in, int depth, Context& ctx) {
  if (depth > kMaxStructureDepth || ctx.deadline.expired()) return false;
  std::string a = trim(a_in), b = trim(b_in);
  if (a.empty() || b.empty()) return false;
  if (a == b) return true;  // the same text: no need to parse (a set's members, reordered)
  if (auto r = compare_equations(a, b, depth, ctx)) return *r;
  if (auto r = compare_unions(a, b, depth, ctx)) return *r;
  Collection ca = collection_of(a), cb = collection_of(b);
  if (ca.kind != Kind::kScalar || cb.kind != Kind::kScalar) return compare_collections(ca, cb, depth, ctx);
  return compare_scalars(a, b, ctx);
}

// GiNaC's Digits is global; set for this call and restored after it.
class DigitsScope {
 public:
  explicit DigitsScope(long digits) : saved_(GiNaC::Digits) { GiNaC::Digits = digits; }
  ~DigitsScope() { GiNaC::Digits = saved_; }

 private:
  long saved_;
};

std::mutex& ginac_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

bool math_equivalent(const std::string& a_raw, const std::string& b_raw, const MathLimits& limits) {
  if (a_raw.size() > limits.max_bytes || b_raw.size() > limits.max_bytes) return false;
  std::lock_guard<std::mutex> lock(ginac_mutex());
  try {
    DigitsScope digits(40);
    std::string a = drop_sizing(a_raw), b = drop_sizing(b_raw);
    detail::Deadline deadline(limits.time_budget);
    bool percent = a.find('%') != std::string::npos || b.find('%') != std::string::npos;
    // '%' as 1/100 first (25% = 0.25), then dropped (25% = 25).
    for (int scale : {100, 1}) {
      if (scale == 1 && !percent) break;
      Context ctx{limits, deadline, SymbolTable{}, ExprOptions{}};
      ctx.options.limits = limits;
      ctx.options.percent_scale = GiNaC::numeric(1, scale);
      if (compare(a, b, 0, ctx)) return true;
    }
  } catch (...) {  // nothing escapes a reward call
  }
  return false;
}

}  // namespace hpcrl::reward
