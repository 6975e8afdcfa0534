// Brace matching for the LaTeX that shows up in answers (\boxed{…}, \frac{…}{…},
// \text{…}). Private to the reward module: the extractors, the number parser
// and the normalisers need "where does this {…} group end" and "drop this
// command", nothing more of LaTeX.
#pragma once

#include <cstddef>
#include <string>

namespace hpcrl::reward::detail {

// `open` indexes a '{'. Returns the index of its matching '}', or npos when the
// group is not closed (a truncated response). Escaped braces "\{" "\}" do not count.
inline size_t brace_group_end(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
      ++i;
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) return i;
  }
  return std::string::npos;
}

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Removes the LaTeX command `cmd` (e.g. "\\left") where it is a whole command,
// i.e. not the prefix of a longer one ("\\leftarrow").
inline void remove_command(std::string& s, const std::string& cmd) {
  for (size_t p = s.find(cmd); p != std::string::npos; p = s.find(cmd, p)) {
    size_t after = p + cmd.size();
    if (after < s.size() && is_alpha(s[after])) {
      p = after;
      continue;
    }
    s.erase(p, cmd.size());
  }
}

}  // namespace hpcrl::reward::detail
