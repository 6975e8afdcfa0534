// The tokenizer interface every stage uses to turn prompts into token ids and
// generated ids back into text. Two implementations: HF `tokenizer.json`
// byte-level BPE (Qwen2/2.5/3, Llama-3, GPT-2 style; tokenizer_bpe.h) and a
// built-in byte tokenizer for the tiny CPU presets (tokenizer_byte.h). Both are
// byte-level, so every UTF-8 string encodes and decodes back exactly.
//
// All methods are const and safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpcrl::io {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text → ids. Added/special tokens written in the text ("<|im_start|>") are
  // matched first and become single ids, as HF does by default. `add_special`
  // adds what the tokenizer declares around a sequence (a BOS, a template).
  // InputError when `text` is not valid UTF-8 (byte offset named).
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special = false) const = 0;

  // Ids → text. `skip_special` drops tokens marked special. Ids that have no
  // token (negative, or the unused rows of a model's padded vocabulary) are
  // skipped, as HF does. Byte sequences that are not valid UTF-8 (a character
  // cut by the end of a generation) become U+FFFD.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;

  // The raw token strings ("Ġworld", "<|im_end|>"); "" for an id without a token.
  std::vector<std::string> pieces(const std::vector<int32_t>& ids) const;
  virtual std::string id_to_token(int32_t id) const = 0;
  // -1 when `token` (a raw token string) is not in the vocabulary.
  virtual int32_t token_to_id(const std::string& token) const = 0;

  // One past the largest token id (the model's embedding may be larger).
  virtual int64_t vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // -1 where the tokenizer declares none.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t pad_id() const = 0;

  // The Jinja chat template the tokenizer declares ("" when none);
  // ChatTemplate::for_tokenizer picks the fixed renderer that reproduces it.
  virtual std::string chat_template_jinja() const = 0;
  // "builtin" or the tokenizer.json path: for messages.
  virtual std::string source() const = 0;
};

// `spec` is "builtin", a directory holding tokenizer.json (+ optional
// tokenizer_config.json), or a tokenizer.json path. InputError naming the path
// and the fix when it is missing or malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);
// The spec of a model's `tokenizer:` key ("" and "byte" are the built-in byte tokenizer).
std::string configured_tokenizer_spec(const std::string& configured);

}  // namespace hpcrl::io
