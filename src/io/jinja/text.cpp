// Python str operations for the Jinja interpreter (text.h).
#include "io/jinja/text.h"

#include "io/jinja/failure.h"
#include "io/tokenizer_bytes.h"

namespace hpcrl::io::jinja::text {

std::u32string decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {  // the text is valid UTF-8 (JSON strings, checked data)
    int32_t cp = 0;
    i += bytes::utf8_next(s, i, &cp);
    out.push_back(static_cast<char32_t>(cp));
  }
  return out;
}

std::string encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) bytes::utf8_append(out, static_cast<int32_t>(cp));
  return out;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string u = decode(s), set = chars ? decode(*chars) : std::u32string();
  auto drop = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return encode(u.substr(b, e - b));
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("ValueError: empty separator");
    size_t start = 0, at;
    while ((maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
           (at = s.find(*sep, start)) != std::string::npos) {
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  std::u32string u = decode(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && is_space(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = u.size();
      while (e > i && is_space(u[e - 1])) --e;
      out.push_back(encode(u.substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < u.size() && !is_space(u[j])) ++j;
    out.push_back(encode(u.substr(i, j - i)));
    i = j;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts `with` between every code point and at both ends
    std::u32string u = decode(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (i < u.size()) out += encode(u.substr(i, 1));
    }
    return out;
  }
  size_t at;
  while ((count < 0 || done < count) && (at = s.find(old, start)) != std::string::npos) {
    out += s.substr(start, at - start) + with;
    start = at + old.size();
    ++done;
  }
  return out + s.substr(start);
}

std::string upper(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return out;
}

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return out;
}

namespace {
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace

std::string title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    if (is_alpha(c)) {
      c = prev_cased ? lower(std::string(1, c))[0] : upper(std::string(1, c))[0];
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  return upper(s.substr(0, 1)) + lower(s.substr(1));
}

size_t length(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace hpcrl::io::jinja::text
