// tokenizer.json's "normalizer": the Unicode normal forms (NFC, NFD, NFKC,
// NFKD) alone or in a Sequence, applied with utf8proc to the text between
// added tokens before pre-tokenization. Qwen2/2.5/3 declare NFC; Llama-3 and
// GPT-2 declare none. Other normalizers (Replace, Prepend, Lowercase, ...)
// belong to SentencePiece-style tokenizers and are rejected with a clear error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer_json.h"

namespace hpcrl::io {

class Normalizer {
 public:
  // From the "normalizer" value (null → identity). InputError naming `w` otherwise.
  static Normalizer from_json(const tokjson::json& j, const tokjson::Where& w);

  bool identity() const { return forms_.empty(); }
  // `text` must be valid UTF-8.
  std::string apply(std::string_view text) const;

 private:
  std::vector<int> forms_;  // utf8proc option sets, applied in order
};

}  // namespace hpcrl::io
