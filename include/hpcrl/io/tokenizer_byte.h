// The built-in tokenizer of the tiny CPU presets: one id per byte (0..255), so
// any text round-trips and no file is needed, plus a few special tokens for
// sequence boundaries, ChatML turns and reasoning. Ids are fixed so that a
// preset's embedding size (kVocabSize) and checkpoints stay valid.
#pragma once

#include <array>

#include "hpcrl/io/tokenizer.h"

namespace hpcrl::io {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256;       // <|bos|>
  static constexpr int32_t kEos = 257;       // <|eos|>
  static constexpr int32_t kPad = 258;       // <|pad|>
  static constexpr int32_t kImStart = 259;   // <|im_start|>
  static constexpr int32_t kImEnd = 260;     // <|im_end|>
  static constexpr int32_t kThink = 261;     // <think>   (not special: kept by skip_special, as in Qwen3)
  static constexpr int32_t kEndThink = 262;  // </think>
  static constexpr int64_t kVocabSize = 263;

  // add_special prepends <|bos|>.
  std::vector<int32_t> encode(const std::string& text, bool add_special = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  // A byte's piece is its GPT-2 byte character (" " → "Ġ"), so pieces are printable.
  std::string id_to_token(int32_t id) const override;
  int32_t token_to_id(const std::string& token) const override;
  int64_t vocab_size() const override { return kVocabSize; }
  bool is_special(int32_t id) const override { return id >= kBos && id <= kImEnd; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  int32_t pad_id() const override { return kPad; }
  // The plain ChatML Jinja template (HF's canonical one).
  std::string chat_template_jinja() const override;
  std::string source() const override { return "builtin"; }

  // The text of the special tokens, by id - kBos.
  static const std::array<const char*, kVocabSize - 256>& special_texts();
};

}  // namespace hpcrl::io
