// The built-in byte tokenizer (see tokenizer_byte.h).
#include "hpcrl/io/tokenizer_byte.h"

#include <cstring>

#include "io/tokenizer_bytes.h"

namespace hpcrl::io {

const std::array<const char*, ByteTokenizer::kVocabSize - 256>& ByteTokenizer::special_texts() {
  static const std::array<const char*, kVocabSize - 256> texts = {
      "<|bos|>", "<|eos|>", "<|pad|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"};
  return texts;
}

std::vector<int32_t> ByteTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 1);
  if (add_special) ids.push_back(kBos);
  const auto& specials = special_texts();
  for (size_t i = 0; i < text.size();) {
    // Special tokens written in the text win (longest first), as with HF's added tokens.
    int32_t best = -1;
    size_t best_len = 0;
    if (text[i] == '<') {
      for (size_t s = 0; s < specials.size(); ++s) {
        size_t len = std::strlen(specials[s]);
        if (len > best_len && text.compare(i, len, specials[s]) == 0) {
          best = static_cast<int32_t>(kBos + s);
          best_len = len;
        }
      }
    }
    if (best >= 0) {
      ids.push_back(best);
      i += best_len;
    } else {
      ids.push_back(static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < 256)
      out.push_back(static_cast<char>(id));
    else if (id >= kBos && id < kVocabSize && !(skip_special && is_special(id)))
      out += special_texts()[id - kBos];
  }
  return bytes::utf8_lossy(out);
}

std::string ByteTokenizer::id_to_token(int32_t id) const {
  if (id >= 0 && id < 256) return bytes::byte_to_unicode()[id];
  if (id >= kBos && id < kVocabSize) return special_texts()[id - kBos];
  return "";
}

int32_t ByteTokenizer::token_to_id(const std::string& token) const {
  const auto& specials = special_texts();
  for (size_t s = 0; s < specials.size(); ++s)
    if (token == specials[s]) return static_cast<int32_t>(kBos + s);
  std::string raw;
  if (bytes::unicode_to_bytes(token, &raw) && raw.size() == 1) return static_cast<unsigned char>(raw[0]);
  return -1;
}

std::string ByteTokenizer::chat_template_jinja() const {
  return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

}  // namespace hpcrl::io
