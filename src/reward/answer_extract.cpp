// Answer extractors (see answer_extract.h). Each scans the response once;
// "last occurrence" everywhere, because models restate and correct themselves
// and the final statement is the one that counts.
#include "hpcrl/reward/answer_extract.h"

#include <algorithm>
#include <array>
#include <utility>

#include "answer_braces.h"
#include "hpcrl/reward/answer_number.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::reward {
namespace {

using detail::is_alpha;
using detail::is_digit;
using detail::is_space;

constexpr std::array<std::pair<Extractor, const char*>, 5> kNames = {{
    {Extractor::kBoxed, "boxed"},
    {Extractor::kAnswerTag, "answer_tag"},
    {Extractor::kAnswerIs, "answer_is"},
    {Extractor::kHash, "hash"},
    {Extractor::kLastNumber, "last_number"},
}};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::optional<std::string> non_empty(const std::string& s) {
  std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  return t;
}

std::string lower_ascii(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Last position of `cmd` used as a whole LaTeX command (not "\boxedx").
size_t rfind_command(const std::string& s, const std::string& cmd) {
  for (size_t p = s.rfind(cmd); p != std::string::npos; p = p == 0 ? std::string::npos : s.rfind(cmd, p - 1)) {
    size_t after = p + cmd.size();
    if (after >= s.size() || !is_alpha(s[after])) return p;
  }
  return std::string::npos;
}

// The rest of the line from `pos`, cut at the end of the sentence: ". " or a
// final '.', but not a decimal point ("3.5").
std::string rest_of_sentence(const std::string& s, size_t pos) {
  size_t eol = s.find('\n', pos);
  std::string line = s.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '.' && (i + 1 == line.size() || is_space(line[i + 1]))) return line.substr(0, i);
  }
  return line;
}

}  // namespace

const char* extractor_name(Extractor e) {
  for (const auto& [k, name] : kNames) {
    if (k == e) return name;
  }
  return "?";
}

std::vector<std::string> extractor_names() {
  std::vector<std::string> out;
  for (const auto& kv : kNames) out.emplace_back(kv.second);
  return out;
}

Extractor parse_extractor(const std::string& name, const std::string& where) {
  for (const auto& [k, n] : kNames) {
    if (name == n) return k;
  }
  std::string msg = where + ": unknown answer extractor '" + name + "'";
  std::string guess = str::closest(name, extractor_names());
  if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
  msg += "; valid extractors: " + str::join(extractor_names(), ", ");
  throw InputError(msg);
}

std::vector<Extractor> parse_extractors(const std::vector<std::string>& names, const std::string& where) {
  if (names.empty()) {
    throw InputError(where + ": empty extractor list; give at least one of " + str::join(extractor_names(), ", ") +
                     " (or leave the key out for the default order)");
  }
  std::vector<Extractor> out;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string at = where + "[" + std::to_string(i) + "]";
    Extractor e = parse_extractor(names[i], at);
    if (std::find(out.begin(), out.end(), e) != out.end()) {
      throw InputError(at + ": extractor '" + names[i] + "' is listed twice; remove the repeat");
    }
    out.push_back(e);
  }
  return out;
}

std::vector<Extractor> default_extractors() {
  return {Extractor::kBoxed, Extractor::kAnswerTag, Extractor::kHash, Extractor::kAnswerIs, Extractor::kLastNumber};
}

std::optional<std::string> extract_boxed(const std::string& text) {
  size_t p = std::string::npos;
  size_t cmd_len = 0;
  for (const char* cmd : {"\\boxed", "\\fbox"}) {
    size_t q = rfind_command(text, cmd);
    if (q != std::string::npos && (p == std::string::npos || q > p)) {
      p = q;
      cmd_len = std::string(cmd).size();
    }
  }
  if (p == std::string::npos) return std::nullopt;
  size_t q = p + cmd_len;
  while (q < text.size() && is_space(text[q])) ++q;
  if (q < text.size() && text[q] == '{') {
    size_t close = detail::brace_group_end(text, q);
    if (close == std::string::npos) return std::nullopt;  // truncated: no final answer
    return non_empty(text.substr(q + 1, close - q - 1));
  }
  // "\boxed 5": the argument is the next whitespace/'$'-delimited token.
  if (q == p + cmd_len) return std::nullopt;
  size_t e = q;
  while (e < text.size() && !is_space(text[e]) && text[e] != '$') ++e;
  return non_empty(text.substr(q, e - q));
}

std::optional<std::string> extract_answer_tag(const std::string& text) {
  size_t close = text.rfind("</answer>");
  if (close == std::string::npos) return std::nullopt;
  size_t open = text.rfind("<answer>", close);
  if (open == std::string::npos) return std::nullopt;
  return non_empty(text.substr(open + 8, close - open - 8));
}

std::optional<std::string> extract_answer_is(const std::string& text) {
  std::string low = lower_ascii(text);
  static const char* kPhrases[] = {"answer is", "answer:", "answer =", "answer will be", "answer would be"};
  size_t best = std::string::npos, best_end = 0;
  for (const char* phrase : kPhrases) {
    std::string ph(phrase);
    size_t p = low.rfind(ph);
    if (p != std::string::npos && (best == std::string::npos || p > best)) {
      best = p;
      best_end = p + ph.size();
    }
  }
  if (best == std::string::npos) return std::nullopt;
  size_t q = best_end;
  // "**Answer:** 42", "answer is: 42", "Answer:\n42"
  while (q < text.size() && (is_space(text[q]) || text[q] == ':' || text[q] == '*')) ++q;
  return non_empty(rest_of_sentence(text, q));
}

std::optional<std::string> extract_hash(const std::string& text) {
  size_t p = text.rfind("####");
  if (p == std::string::npos) return std::nullopt;
  size_t q = p + 4;
  size_t eol = text.find('\n', q);
  return non_empty(text.substr(q, eol == std::string::npos ? std::string::npos : eol - q));
}

std::optional<std::string> extract_last_number(const std::string& text) {
  std::optional<NumberToken> last;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    bool starts = is_digit(c) || (c == '.' && i + 1 < text.size() && is_digit(text[i + 1])) || c == '\\';
    if (!starts) {
      ++i;
      continue;
    }
    // A '-' directly before counts as a sign unless it joins two words ("3-4").
    size_t from = i;
    if (i > 0 && text[i - 1] == '-' && (i == 1 || !(is_alpha(text[i - 2]) || is_digit(text[i - 2])))) from = i - 1;
    auto tok = scan_number(text, from);
    if (!tok) {
      ++i;
      continue;
    }
    last = tok;
    i = std::max(tok->end, i + 1);
  }
  if (!last) return std::nullopt;
  return text.substr(last->begin, last->end - last->begin);
}

std::optional<std::string> extract_with(Extractor e, const std::string& text) {
  switch (e) {
    case Extractor::kBoxed: return extract_boxed(text);
    case Extractor::kAnswerTag: return extract_answer_tag(text);
    case Extractor::kAnswerIs: return extract_answer_is(text);
    case Extractor::kHash: return extract_hash(text);
    case Extractor::kLastNumber: return extract_last_number(text);
  }
  return std::nullopt;
}

std::optional<Extraction> extract_answer(const std::string& text, const std::vector<Extractor>& order) {
  for (Extractor e : order) {
    if (auto a = extract_with(e, text)) return Extraction{*a, e};
  }
  return std::nullopt;
}

}  // namespace hpcrl::reward
