// Small string helpers used by error messages ("did you mean …") and parsers.
#pragma once

#include <string>
#include <vector>

namespace hpcrl::str {

// Levenshtein distance (insert/delete/substitute, each cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` if it is close enough to be a plausible typo
// (distance ≤ max(2, |word|/3)), else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

std::vector<std::string> split(const std::string& s, char sep);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::string trim(const std::string& s);
bool starts_with(const std::string& s, const std::string& prefix);
bool ends_with(const std::string& s, const std::string& suffix);
// `s` with each NUL byte written as "\0", for a message printed as a C string (a NUL in a
// YAML key or value would otherwise end the message there).
std::string show_nul(const std::string& s);

// Parses "1,2,3" into integers; InputError naming `what` on a bad element.
std::vector<long long> parse_int_list(const std::string& s, const std::string& what);

}  // namespace hpcrl::str
