// Byte-level helpers shared by the tokenizers. GPT-2's byte-level BPE writes
// every byte as a printable Unicode character (space → "Ġ", newline → "Ċ") so
// that vocab entries are valid strings; hpcrl maps vocab entries back to raw
// bytes once at load time and runs BPE on bytes. The UTF-8 helpers validate
// input (PCRE2 and utf8proc need valid UTF-8) and make decoded bytes printable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hpcrl::io::bytes {

// GPT-2's bytes_to_unicode(): byte b → its printable character, UTF-8 encoded.
const std::array<std::string, 256>& byte_to_unicode();

// Inverse of byte_to_unicode over a whole string ("Ġhi" → " hi"). False when a
// character is not one of the 256 byte characters.
bool unicode_to_bytes(std::string_view text, std::string* out);

// Byte offset of the first invalid UTF-8 sequence, or npos when `s` is valid.
size_t utf8_invalid_offset(std::string_view s);

// `s` with each maximal invalid UTF-8 subpart replaced by U+FFFD (what HF's
// byte-level decoder and Rust's from_utf8_lossy do).
std::string utf8_lossy(std::string_view s);

// Decodes the code point starting at s[i] (valid UTF-8 assumed) and returns its length.
size_t utf8_next(std::string_view s, size_t i, int32_t* cp);

// Appends the UTF-8 encoding of `cp`.
void utf8_append(std::string& out, int32_t cp);

// Unicode White_Space (Rust char::is_whitespace, Python str.isspace).
bool is_whitespace(int32_t cp);

}  // namespace hpcrl::io::bytes
