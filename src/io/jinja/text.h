// Python str operations on UTF-8 text, by code point, as Jinja templates call
// them: strip/lstrip/rstrip (Unicode whitespace by default), split, replace,
// case mapping (ASCII letters), indexing and slicing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpcrl::io::jinja::text {

std::u32string decode(const std::string& s);
std::string encode(const std::u32string& s);
bool is_space(char32_t c);  // Python str.isspace()

// `chars` nullopt = whitespace, else the set of code points in chars.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// Python str.split(sep, maxsplit); nullopt sep = runs of whitespace. Empty sep is an error.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string title(const std::string& s);       // Python str.title()
std::string capitalize(const std::string& s);  // first letter upper, the rest lower
size_t length(const std::string& s);           // code points

}  // namespace hpcrl::io::jinja::text
