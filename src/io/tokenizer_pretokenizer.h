// tokenizer.json's "pre_tokenizer": how text is cut into words before BPE.
// Byte-level BPE files declare either a ByteLevel pre-tokenizer with
// use_regex (GPT-2's built-in pattern) or a Sequence of Split steps with their
// own regex (Qwen2/3, Llama-3, DeepSeek) ending in a ByteLevel step. The
// regexes use Unicode classes (\p{L}, \p{N}), so they run on PCRE2 in UTF + UCP
// mode with the JIT. The ByteLevel step's character mapping itself is implicit:
// BPE runs on raw bytes (see tokenizer_bytes.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer_json.h"

namespace hpcrl::io {

// A compiled PCRE2 pattern (UTF, UCP, JIT where available).
class Regex {
 public:
  // Compiles `pattern` (`literal`: match it as a plain string). On failure
  // returns nullptr and sets *error to PCRE2's message with the offset.
  // `origin` ("FILE: pre_tokenizer.pattern.Regex") names it when a match fails.
  static std::shared_ptr<Regex> compile(const std::string& pattern, bool literal, std::string* error,
                                        std::string origin = "the built-in GPT-2 pre-tokenizer pattern");
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-empty, non-overlapping matches [start, end) in `subject` (valid UTF-8), left to right.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  std::string origin_;
};

class PreTokenizer {
 public:
  // From the "pre_tokenizer" value; InputError naming `w` on anything that is
  // not a byte-level BPE pre-tokenizer hpcrl can reproduce exactly.
  static PreTokenizer from_json(const tokjson::json& j, const tokjson::Where& w);

  // Appends the words of `text` (valid UTF-8) to *out.
  void split(std::string_view text, std::vector<std::string>* out) const;

  // GPT-2's pattern, used by ByteLevel with use_regex = true.
  static const char* gpt2_pattern();

 private:
  struct Step {
    std::shared_ptr<Regex> regex;  // null: no split
    bool remove_matches = false;   // Split behavior "Removed" (else "Isolated")
    bool add_prefix_space = false; // ByteLevel: prepend ' ' to a word not starting with one
  };
  void parse(const tokjson::json& j, const tokjson::Where& w, bool last);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace hpcrl::io
