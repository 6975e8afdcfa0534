// Answer normalisation (see answer_normalize.h for the rules). Everything here
// is byte-level on UTF-8: the only non-ASCII sequences treated specially are
// the Unicode minus, the degree sign and leading currency symbols; all other
// non-ASCII bytes pass through unchanged and count as "word" characters.
#include "hpcrl/reward/answer_normalize.h"

#include <utility>
#include <vector>

#include "answer_braces.h"
#include "hpcrl/reward/math_equivalence.h"

namespace hpcrl::reward {
namespace {

using detail::is_alpha;
using detail::is_digit;
using detail::is_space;
using detail::remove_command;

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
}

// "\text{abc}" → "abc" for every wrapper whose content is the value itself.
void unwrap_text_commands(std::string& s) {
  static const char* kWrappers[] = {"\\text",   "\\textbf", "\\textit", "\\textrm",       "\\mathrm",
                                    "\\mathbf", "\\mbox",   "\\mathit", "\\operatorname", "\\textnormal"};
  bool changed = true;
  while (changed) {
    changed = false;
    for (const char* w : kWrappers) {
      std::string cmd(w);
      for (size_t p = s.find(cmd); p != std::string::npos; p = s.find(cmd, p + 1)) {
        size_t q = p + cmd.size();
        if (q < s.size() && is_alpha(s[q])) continue;  // a longer command
        while (q < s.size() && is_space(s[q])) ++q;
        if (q >= s.size() || s[q] != '{') continue;
        size_t close = detail::brace_group_end(s, q);
        if (close == std::string::npos) continue;
        s = s.substr(0, p) + s.substr(q + 1, close - q - 1) + s.substr(close + 1);
        changed = true;
        break;
      }
    }
  }
}

void remove_calculator_annotations(std::string& s) {
  for (size_t p = s.find("<<"); p != std::string::npos; p = s.find("<<", p)) {
    size_t q = s.find(">>", p + 2);
    if (q == std::string::npos) break;
    s.erase(p, q + 2 - p);
  }
}

// One pass of outer-wrapper stripping; returns true when something changed.
bool strip_outer(std::string& s) {
  std::string t = trim(s);
  static const std::pair<const char*, const char*> kDelims[] = {
      {"$$", "$$"}, {"$", "$"}, {"\\(", "\\)"}, {"\\[", "\\]"}};
  for (const auto& [open, close] : kDelims) {
    std::string o(open), c(close);
    if (t.size() >= o.size() + c.size() && t.compare(0, o.size(), o) == 0 &&
        t.compare(t.size() - c.size(), c.size(), c) == 0) {
      s = t.substr(o.size(), t.size() - o.size() - c.size());
      return true;
    }
  }
  for (const char* box : {"\\boxed", "\\fbox"}) {
    std::string b(box);
    if (t.compare(0, b.size(), b) != 0) continue;
    size_t q = b.size();
    while (q < t.size() && is_space(t[q])) ++q;
    if (q < t.size() && t[q] == '{' && detail::brace_group_end(t, q) == t.size() - 1) {
      s = t.substr(q + 1, t.size() - q - 2);
      return true;
    }
  }
  // "{9}" → "9": a redundant group, as in \boxed{{9}} (an escaped "\{" set is not one).
  if (t.size() >= 2 && t.front() == '{' && detail::brace_group_end(t, 0) == t.size() - 1) {
    s = t.substr(1, t.size() - 2);
    return true;
  }
  // "(5)" → "5", but a tuple "(1, 2)" keeps its parentheses.
  if (t.size() >= 2 && t.front() == '(' && t.back() == ')' && t.find(',') == std::string::npos &&
      t.find(')') == t.size() - 1) {
    s = t.substr(1, t.size() - 2);
    return true;
  }
  while (!t.empty() && (t.back() == '.' || t.back() == ',' || t.back() == ';')) {
    t.pop_back();
  }
  bool changed = t != s;
  s = t;
  return changed;
}

// "x = 5" → "5": a short variable name on the left of a single '='.
void drop_variable_prefix(std::string& s) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || s.find('=', eq + 1) != std::string::npos) return;
  std::string lhs = trim(s.substr(0, eq));
  if (lhs.empty() || lhs.size() > 3 || !is_alpha(lhs[0])) return;
  for (char c : lhs) {
    if (!is_alpha(c) && !is_digit(c) && c != '_') return;
  }
  s = s.substr(eq + 1);
}

void drop_leading_currency(std::string& s) {
  s = trim(s);
  for (const char* sym : {"\xE2\x82\xAC", "\xC2\xA3", "\xC2\xA5"}) {  // € £ ¥
    std::string c(sym);
    if (s.compare(0, c.size(), c) == 0) s = s.substr(c.size());
  }
  // A sign written before the currency: "-$5" became "-5" already; "- 5" → "-5".
  if (s.size() >= 2 && (s[0] == '-' || s[0] == '+') && is_space(s[1])) s = s[0] + trim(s.substr(1));
}

// Unit words after a number: letters (any non-ASCII byte counts as one),
// spaces and light punctuation, and no digits or operators — "dollars per
// hour" and "cm" are units, "x+1" and "m^2" are not.
bool is_unit_words(const std::string& rest) {
  if (rest.empty()) return true;
  unsigned char first = static_cast<unsigned char>(rest[0]);
  if (!is_alpha(rest[0]) && first < 0x80) return false;
  for (char ch : rest) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x80 || is_alpha(ch) || is_space(ch)) continue;
    if (ch == '.' || ch == ',' || ch == '\'' || ch == '-' || ch == '(' || ch == ')') continue;
    return false;
  }
  return true;
}

std::string canonical_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (is_space(c)) continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// "5x", "2n": one letter glued to the number is a variable times the number,
// not a unit ("5 m", "5cm" stay units).
bool glued_variable(const std::string& s, size_t number_end) {
  return number_end + 1 == s.size() && is_alpha(s[number_end]);
}

// Step 1; `drop_prefix` false keeps an "x = " prefix (math_equivalent wants
// whole equations: "y = 2x+1" against "y - 2x = 1").
std::string strip_latex(const std::string& raw, bool drop_prefix) {
  std::string s = raw;
  remove_calculator_annotations(s);
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 minus sign
  replace_all(s, "\xC2\xB0", "");       // degree sign
  replace_all(s, "{,}", ",");
  replace_all(s, "\\$", "$");
  replace_all(s, "\\%", "%");
  for (const char* sp : {"\\!", "\\,", "\\;", "\\:"}) replace_all(s, sp, "");
  replace_all(s, "\\ ", " ");
  replace_all(s, "~", " ");
  replace_all(s, "^{\\circ}", "");
  replace_all(s, "^\\circ", "");
  for (const char* cmd : {"\\qquad", "\\quad", "\\left", "\\right", "\\displaystyle", "\\degree"}) {
    remove_command(s, cmd);
  }
  unwrap_text_commands(s);
  while (strip_outer(s)) {
  }
  replace_all(s, "$", "");
  if (drop_prefix) drop_variable_prefix(s);
  drop_leading_currency(s);
  while (strip_outer(s)) {
  }
  return s;
}

}  // namespace

std::string strip_answer_latex(const std::string& raw) { return strip_latex(raw, true); }

NormalizedAnswer normalize_answer(const std::string& raw) {
  NormalizedAnswer out;
  std::string s = strip_answer_latex(raw);
  out.stripped = trim(strip_latex(raw, false));
  out.text = canonical_text(s);
  if (auto mixed = parse_mixed_number(s)) {
    out.number = mixed;
  } else if (auto tok = scan_number(s, 0)) {
    std::string rest = trim(s.substr(tok->end));
    bool spaced_percent = !rest.empty() && rest[0] == '%';  // "50 %"
    if (spaced_percent) rest = trim(rest.substr(1));
    if (is_unit_words(rest) && !glued_variable(s, tok->end)) {
      out.number = tok->number;
      out.number->percent = out.number->percent || spaced_percent;
    }
  }
  return out;
}

bool answers_equivalent(const NormalizedAnswer& a, const NormalizedAnswer& b, double rel_tol) {
  if (a.number && b.number) {
    if (numbers_equal(*a.number, *b.number, rel_tol)) return true;
    // Two plain numbers are settled exactly here (1000000 != 1000001, 0.333 !=
    // 1/3); only a percentage has a second reading (25% = 0.25) for the math path.
    if (!a.number->percent && !b.number->percent) return false;
  } else if (!a.text.empty() && a.text == b.text) {
    return true;
  }
  if (a.stripped.empty() || b.stripped.empty()) return false;
  return math_equivalent(a.stripped, b.stripped);
}

bool answers_equivalent(const std::string& a, const std::string& b, double rel_tol) {
  return answers_equivalent(normalize_answer(a), normalize_answer(b), rel_tol);
}

}  // namespace hpcrl::reward
