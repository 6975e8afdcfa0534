// Encoding and decoding for tokenizer.json byte-level BPE (see tokenizer_bpe.h).
// The order of steps is HF's: added tokens on the raw text, normalise what is
// between them, added tokens declared `normalized` on the normalised text,
// pre-tokenize each remaining run, BPE each word.
#include "io/tokenizer_bpe.h"

#include "hpcrl/util/error.h"
#include "io/tokenizer_bytes.h"

namespace hpcrl::io {

std::vector<int32_t> BpeTokenizer::encode(const std::string& text, bool add_special) const {
  size_t bad = bytes::utf8_invalid_offset(text);
  if (bad != std::string::npos)
    throw InputError("text to tokenize is not valid UTF-8 (byte offset " + std::to_string(bad) +
                     "); fix the input's encoding (tokenizer " + path_ + ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size() + 1);
  if (add_special) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  std::string_view view(text);
  for (const auto& seg : raw_matcher_.split(view)) {
    if (seg.id >= 0)
      ids.push_back(seg.id);
    else
      encode_normalized(view.substr(seg.begin, seg.end - seg.begin), &ids);
  }
  if (add_special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void BpeTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>* ids) const {
  if (normalizer_.identity() && normalized_matcher_.empty()) {
    encode_plain(text, ids);
    return;
  }
  std::string norm = normalizer_.apply(text);
  std::string_view view(norm);
  for (const auto& seg : normalized_matcher_.split(view)) {
    if (seg.id >= 0)
      ids->push_back(seg.id);
    else
      encode_plain(view.substr(seg.begin, seg.end - seg.begin), ids);
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<std::string> words;
  pre_tokenizer_.split(text, &words);
  for (const auto& w : words) model_->encode_word(w, ids);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (!known(id) || (skip_special && special_[id])) continue;
    out += bytes_[id];
  }
  return bytes::utf8_lossy(out);
}

std::string BpeTokenizer::id_to_token(int32_t id) const { return known(id) ? pieces_[id] : std::string(); }

int32_t BpeTokenizer::token_to_id(const std::string& token) const {
  auto it = added_ids_.find(token);
  if (it != added_ids_.end()) return it->second;
  std::string raw;
  if (bytes::unicode_to_bytes(token, &raw)) return model_->lookup(raw);
  it = unmapped_ids_.find(token);
  return it == unmapped_ids_.end() ? -1 : it->second;
}

bool BpeTokenizer::is_special(int32_t id) const { return known(id) && special_[id]; }

}  // namespace hpcrl::io
