// A HF `tokenizer.json` byte-level BPE tokenizer (Qwen2/2.5/3, Llama-3, GPT-2,
// DeepSeek): normalizer → added tokens → pre-tokenizer regex → BPE merges, and
// the byte-level decoder back to text, reproducing HF tokenizers' ids exactly.
// bos/eos/pad and the chat template come from tokenizer_config.json when it is
// present. Loading is in tokenizer_bpe_load.cpp; this file's .cpp encodes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpcrl/io/tokenizer.h"
#include "io/bpe_model.h"
#include "io/tokenizer_added.h"
#include "io/tokenizer_normalizer.h"
#include "io/tokenizer_pretokenizer.h"

namespace hpcrl::io {

class BpeTokenizer final : public Tokenizer {
 public:
  // `config_json` may be "" (no tokenizer_config.json). InputError naming the
  // file, the key path and the fix on anything malformed or unsupported.
  static std::unique_ptr<BpeTokenizer> load(const std::string& tokenizer_json, const std::string& config_json);

  std::vector<int32_t> encode(const std::string& text, bool add_special = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  std::string id_to_token(int32_t id) const override;
  int32_t token_to_id(const std::string& token) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  bool is_special(int32_t id) const override;
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  std::string chat_template_jinja() const override { return chat_template_; }
  std::string source() const override { return path_; }

 private:
  BpeTokenizer() = default;
  void encode_plain(std::string_view text, std::vector<int32_t>* ids) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>* ids) const;
  bool known(int32_t id) const { return id >= 0 && id < vocab_size() && has_token_[id]; }

  // Load steps (tokenizer_bpe_load.cpp).
  using PieceIds = std::unordered_map<std::string_view, int32_t>;  // vocab piece → id; views into the json
  void load_model(const tokjson::json& model, const tokjson::Where& w);
  PieceIds load_vocab(const tokjson::json& vocab, const tokjson::Where& wv);
  void load_merges(const tokjson::json& merges, const tokjson::Where& wm, const PieceIds& by_piece);
  void load_added_tokens(const tokjson::json& list, const tokjson::Where& w);
  void load_post_processor(const tokjson::json& j, const tokjson::Where& w);
  void load_config(const std::string& config_json);

  std::string path_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_;                   // addresses fixed once loaded (matchers point here)
  std::unordered_map<std::string, int32_t> added_ids_;  // content → id
  // Vocab entries that are not spelled in byte characters: BPE never produces
  // them; they decode to their own UTF-8 (HF's byte-level decoder does the same).
  std::unordered_map<std::string, int32_t> unmapped_ids_;
  AddedTokenMatcher raw_matcher_;                   // added tokens matched on the raw text
  AddedTokenMatcher normalized_matcher_;            // those with normalized = true, matched after normalising

  // Per id: raw token string, its bytes for decoding, flags.
  std::vector<std::string> pieces_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> has_token_, special_;

  std::vector<int32_t> prefix_ids_, suffix_ids_;    // what add_special puts around a sequence
  bool has_template_ = false;                       // a TemplateProcessing post-processor set them
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  std::string chat_template_;  // tokenizer_config.json's Jinja chat_template
};

}  // namespace hpcrl::io
