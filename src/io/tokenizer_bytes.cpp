// Byte-level character mapping and UTF-8 helpers (see tokenizer_bytes.h).
#include "io/tokenizer_bytes.h"

namespace hpcrl::io::bytes {
namespace {

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 and, in *bad, the
// length of its maximal invalid subpart (Unicode §3.9 "substitution of maximal
// subparts", which is what Rust's from_utf8_lossy replaces with one U+FFFD).
size_t sequence_length(std::string_view s, size_t i, size_t* bad) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;          // no overlong forms
    if (b == 0xED) hi = 0x9F;          // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;          // ≤ U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      *bad = k;
      return 0;
    }
    auto c = static_cast<unsigned char>(s[i + k]);
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      *bad = k;
      return 0;
    }
  }
  return len;
}

std::array<std::string, 256> make_byte_to_unicode() {
  std::array<std::string, 256> table;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    utf8_append(table[b], printable ? b : next++);
  }
  return table;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = make_byte_to_unicode();
  return table;
}

bool unicode_to_bytes(std::string_view text, std::string* out) {
  // The byte characters are all below U+0144, so the inverse is a flat table (-1: not a byte character).
  static const std::array<int16_t, 0x144> inverse = [] {
    std::array<int16_t, 0x144> m;
    m.fill(-1);
    const auto& table = byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
      int32_t cp = 0;
      utf8_next(table[b], 0, &cp);
      m[cp] = static_cast<int16_t>(b);
    }
    return m;
  }();
  out->clear();
  for (size_t i = 0; i < text.size();) {
    int32_t cp = 0;
    i += utf8_next(text, i, &cp);
    if (cp >= static_cast<int32_t>(inverse.size()) || inverse[cp] < 0) return false;
    out->push_back(static_cast<char>(inverse[cp]));
  }
  return true;
}

size_t utf8_invalid_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0, len = sequence_length(s, i, &bad);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0, len = sequence_length(s, i, &bad);
    if (len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

size_t utf8_next(std::string_view s, size_t i, int32_t* cp) {
  auto b = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return static_cast<int32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  if (b < 0xE0 && i + 1 < s.size()) {
    *cp = ((b & 0x1F) << 6) | cont(1);
    return 2;
  }
  if (b < 0xF0 && i + 2 < s.size()) {
    *cp = ((b & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    return 3;
  }
  if (i + 3 < s.size()) {
    *cp = ((b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    return 4;
  }
  *cp = 0xFFFD;  // truncated sequence: callers validate first, this only keeps us in bounds
  return 1;
}

void utf8_append(std::string& out, int32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_whitespace(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

}  // namespace hpcrl::io::bytes
