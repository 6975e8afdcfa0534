// Loading a HF tokenizer.json (+ tokenizer_config.json) into a BpeTokenizer.
// Everything hpcrl cannot reproduce exactly is rejected here, at load, with the
// file, the key path and the fix — never a silently different tokenization.
#include "hpcrl/util/error.h"
#include "io/tokenizer_bpe.h"
#include "io/tokenizer_bytes.h"

namespace hpcrl::io {
namespace {

using tokjson::json;
using tokjson::Where;

// Token ids index dense tables; anything past this is a corrupt file.
constexpr int64_t kMaxTokenId = 1 << 24;

const char* kSupported =
    "hpcrl supports byte-level BPE tokenizer.json files (GPT-2, Qwen2/2.5/3, Llama-3, DeepSeek)";

int32_t token_id(const json& v, const Where& w) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxTokenId)
    tokjson::fail(w, "token id " + tokjson::brief(v) + " is not an integer in [0, " + std::to_string(kMaxTokenId) + ")",
                  "the file is damaged: download it again");
  return static_cast<int32_t>(v.get<int64_t>());
}

// A special token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::string config_token(const json& v, const Where& w) {
  if (v.is_object()) return tokjson::require_string(tokjson::require(v, w, "content"), w.at("content"));
  return tokjson::require_string(v, w);
}

// The model's settings hpcrl reproduces: a BPE model without dropout, prefixes or suffixes.
void check_bpe_options(const json& model, const Where& w) {
  tokjson::require_object(model, w);
  auto type_it = model.find("type");
  std::string type = type_it == model.end() ? "BPE" : tokjson::require_string(*type_it, w.at("type"));
  if (type != "BPE")
    tokjson::fail(w.at("type"), "model type '" + type + "' is not supported",
                  std::string(kSupported) + "; Unigram, WordPiece and WordLevel models are not");
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0))
    tokjson::fail(w.at("dropout"), "BPE dropout " + tokjson::brief(*dropout) + " is not supported",
                  "set \"dropout\": null (dropout is a training-time augmentation)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      tokjson::fail(w.at(key), std::string(key) + " " + tokjson::brief(*it) + " is not supported",
                    std::string(kSupported) + " (they set it to null or \"\")");
  }
}

// `missing`: the bytes BpeModel::finish found without a token (wv: model.vocab).
void check_all_bytes(const std::vector<int>& missing, const Where& wv) {
  if (!missing.empty())
    tokjson::fail(wv, "has no token for byte " + std::to_string(missing[0]) + " ('" +
                          bytes::byte_to_unicode()[missing[0]] + "') and " + std::to_string(missing.size() - 1) +
                          " other bytes",
                  "a byte-level BPE vocabulary contains all 256 byte characters: the file is damaged or not "
                  "byte-level");
}

// The two tokens of merge `m` (entry i of model.merges at `wm`), as views into `m`.
void merge_pair(const json& m, const Where& wm, size_t i, std::string_view* left, std::string_view* right) {
  if (m.is_string()) {
    std::string_view s = m.get_ref<const std::string&>();
    size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      tokjson::fail(wm.at(i), "merge " + tokjson::brief(m) + " is not two tokens separated by one space",
                    "the file is damaged: download it again");
    *left = s.substr(0, sp);
    *right = s.substr(sp + 1);
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *left = m[0].get_ref<const std::string&>();
    *right = m[1].get_ref<const std::string&>();
  } else {
    tokjson::fail(wm.at(i), "merge " + tokjson::brief(m) + " is neither \"a b\" nor [\"a\", \"b\"]",
                  "the file is damaged: download it again");
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::string& tokenizer_json, const std::string& config_json) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->path_ = tokenizer_json;
  json root = tokjson::parse_file(tokenizer_json);
  Where w{tokenizer_json, ""};
  tokjson::require_object(root, w);

  t->load_model(tokjson::require(root, w, "model", std::string(kSupported) + "; this file has no \"model\" (not a "
                                                                              "tokenizer.json?)"),
                w.at("model"));
  auto norm = root.find("normalizer");
  if (norm != root.end()) t->normalizer_ = Normalizer::from_json(*norm, w.at("normalizer"));
  t->pre_tokenizer_ = PreTokenizer::from_json(tokjson::require(root, w, "pre_tokenizer", kSupported),
                                              w.at("pre_tokenizer"));

  // The byte-level decoder is implied by how decode() works; require the file to say so.
  const json& dec = tokjson::require(root, w, "decoder", kSupported);
  bool byte_level = dec.is_object() && dec.value("type", json()) == json("ByteLevel");
  if (!byte_level)
    tokjson::fail(w.at("decoder"), "decoder " + tokjson::brief(dec) + " is not ByteLevel", kSupported);

  auto added = root.find("added_tokens");
  if (added != root.end() && !added->is_null()) t->load_added_tokens(*added, w.at("added_tokens"));
  auto post = root.find("post_processor");
  if (post != root.end()) t->load_post_processor(*post, w.at("post_processor"));
  t->special_.assign(t->pieces_.size(), 0);
  for (const AddedToken& a : t->added_) t->special_[a.id] = a.special ? 1 : 0;
  if (!config_json.empty()) t->load_config(config_json);
  return t;
}

void BpeTokenizer::load_model(const json& model, const Where& w) {
  check_bpe_options(model, w);
  model_ = std::make_unique<BpeModel>(tokjson::optional_bool(model, w, "ignore_merges", false));
  Where wv = w.at("vocab");
  const json& vocab = tokjson::require_object(tokjson::require(model, w, "vocab", kSupported), wv);
  const json& merges = tokjson::require_array(tokjson::require(model, w, "merges", kSupported), w.at("merges"));
  model_->reserve(vocab.size(), merges.size());
  PieceIds by_piece = load_vocab(vocab, wv);
  check_all_bytes(model_->finish(), wv);
  load_merges(merges, w.at("merges"), by_piece);
}

// Vocabulary: "piece" → id. Pieces are spelled in GPT-2's byte characters.
BpeTokenizer::PieceIds BpeTokenizer::load_vocab(const json& vocab, const Where& wv) {
  PieceIds by_piece;
  by_piece.reserve(vocab.size());
  std::string raw;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json& v = it.value();
    // The common case without building a Where (151k entries).
    int32_t id = v.is_number_unsigned() && v.get<uint64_t>() < kMaxTokenId ? static_cast<int32_t>(v.get<uint64_t>())
                                                                           : token_id(v, wv.at(it.key()));
    if (id >= static_cast<int32_t>(pieces_.size())) {
      pieces_.resize(id + 1);
      bytes_.resize(id + 1);
      has_token_.resize(id + 1, 0);
    }
    if (has_token_[id])
      tokjson::fail(wv.at(it.key()), "id " + std::to_string(id) + " is also used by '" + pieces_[id] + "'",
                    "vocab ids must be unique: the file is damaged, download it again");
    has_token_[id] = 1;
    pieces_[id] = it.key();
    by_piece.emplace(it.key(), id);
    if (bytes::unicode_to_bytes(it.key(), &raw)) {
      bytes_[id] = raw;
      model_->add_token(raw, id);
    } else {
      bytes_[id] = it.key();
      unmapped_ids_.emplace(it.key(), id);
    }
  }
  return by_piece;
}

// Merges in rank order: "a b" (Llama-3, GPT-2) or ["a", "b"] (Qwen3, newer files).
void BpeTokenizer::load_merges(const json& merges, const Where& wm, const PieceIds& by_piece) {
  std::string_view left, right;
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    merge_pair(m, wm, i, &left, &right);
    joined.assign(left);
    joined.append(right);
    int32_t ids[3];
    std::string_view parts[3] = {left, right, joined};
    for (int k = 0; k < 3; ++k) {
      auto it = by_piece.find(parts[k]);
      if (it == by_piece.end())
        tokjson::fail(wm.at(i), "merge " + tokjson::brief(m) + " uses token '" + std::string(parts[k]) +
                                    "', which is not in model.vocab",
                      "vocab and merges come from different files, or the file is damaged: download it again");
      ids[k] = it->second;
    }
    model_->add_merge(ids[0], ids[1], ids[2]);
  }
}

void BpeTokenizer::load_added_tokens(const json& list, const Where& w) {
  tokjson::require_array(list, w);
  added_.reserve(list.size());  // the matchers keep pointers into added_
  for (size_t i = 0; i < list.size(); ++i) {
    Where wi = w.at(i);
    const json& j = tokjson::require_object(list[i], wi);
    AddedToken a;
    a.id = token_id(tokjson::require(j, wi, "id"), wi.at("id"));
    a.content = tokjson::require_string(tokjson::require(j, wi, "content"), wi.at("content"));
    if (bytes::utf8_invalid_offset(a.content) != std::string::npos)
      tokjson::fail(wi.at("content"), "is not valid UTF-8", "the file is damaged: download it again");
    a.special = tokjson::optional_bool(j, wi, "special", false);
    a.lstrip = tokjson::optional_bool(j, wi, "lstrip", false);
    a.rstrip = tokjson::optional_bool(j, wi, "rstrip", false);
    a.single_word = tokjson::optional_bool(j, wi, "single_word", false);
    a.normalized = tokjson::optional_bool(j, wi, "normalized", !a.special);  // HF's default
    added_.push_back(a);
  }
  for (const AddedToken& a : added_) {
    if (a.id >= static_cast<int32_t>(pieces_.size())) {
      pieces_.resize(a.id + 1);
      bytes_.resize(a.id + 1);
      has_token_.resize(a.id + 1, 0);
    }
    // An added token overrides a vocab entry with the same id (HF decodes it as the added content).
    pieces_[a.id] = a.content;
    bytes_[a.id] = a.content;
    has_token_[a.id] = 1;
    added_ids_[a.content] = a.id;
    // A normalized token is matched in normalised text, so in its normalised spelling.
    if (a.normalized)
      normalized_matcher_.add(&a, normalizer_.apply(a.content));
    else
      raw_matcher_.add(&a, a.content);
  }
}

void BpeTokenizer::load_post_processor(const json& j, const Where& w) {
  if (j.is_null()) return;
  std::string type = tokjson::require_string(tokjson::require(j, w, "type"), w.at("type"));
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    Where wp = w.at("processors");
    const json& list = tokjson::require_array(tokjson::require(j, w, "processors"), wp);
    for (size_t i = 0; i < list.size(); ++i) load_post_processor(list[i], wp.at(i));
    return;
  }
  if (type != "TemplateProcessing")
    tokjson::fail(w.at("type"), "post-processor '" + type + "' is not supported",
                  "hpcrl supports ByteLevel, TemplateProcessing and Sequence post-processors");
  // "single": [{"SpecialToken": {"id": "<|begin_of_text|>"}}, {"Sequence": {"id": "A"}}, ...]
  Where ws = w.at("single");
  const json& single = tokjson::require_array(tokjson::require(j, w, "single"), ws);
  const json& specials = tokjson::require_object(tokjson::require(j, w, "special_tokens"), w.at("special_tokens"));
  prefix_ids_.clear();
  suffix_ids_.clear();
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    Where wi = ws.at(i);
    const json& item = tokjson::require_object(single[i], wi);
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const json& st = tokjson::require_object(tokjson::require(item, wi, "SpecialToken"), wi.at("SpecialToken"));
    std::string name = tokjson::require_string(tokjson::require(st, wi.at("SpecialToken"), "id"),
                                               wi.at("SpecialToken").at("id"));
    auto sp = specials.find(name);
    if (sp == specials.end())
      tokjson::fail(wi, "special token '" + name + "' is not listed in post_processor.special_tokens",
                    "the file is damaged: download it again");
    Where wsp = w.at("special_tokens").at(name).at("ids");
    const json& ids = tokjson::require_array(tokjson::require(*sp, w.at("special_tokens").at(name), "ids"), wsp);
    for (size_t k = 0; k < ids.size(); ++k) (seen_sequence ? suffix_ids_ : prefix_ids_).push_back(token_id(ids[k], wsp.at(k)));
  }
  has_template_ = true;
}

void BpeTokenizer::load_config(const std::string& config_json) {
  json cfg = tokjson::parse_file(config_json);
  Where w{config_json, ""};
  tokjson::require_object(cfg, w);
  auto resolve = [&](const char* key) -> int32_t {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return -1;
    std::string token = config_token(*it, w.at(key));
    int32_t id = token_to_id(token);
    if (id < 0)
      tokjson::fail(w.at(key), "token '" + token + "' is not in " + path_,
                    "tokenizer.json and tokenizer_config.json come from different models: use the pair shipped "
                    "together");
    return id;
  };
  bos_ = resolve("bos_token");
  eos_ = resolve("eos_token");
  pad_ = resolve("pad_token");
  // Without a TemplateProcessing post-processor, HF's add_bos_token/add_eos_token decide.
  if (!has_template_) {
    if (tokjson::optional_bool(cfg, w, "add_bos_token", false)) {
      if (bos_ < 0) tokjson::fail(w.at("add_bos_token"), "is true but no bos_token is set", "set bos_token");
      prefix_ids_ = {bos_};
    }
    if (tokjson::optional_bool(cfg, w, "add_eos_token", false)) {
      if (eos_ < 0) tokjson::fail(w.at("add_eos_token"), "is true but no eos_token is set", "set eos_token");
      suffix_ids_ = {eos_};
    }
  }
  auto ct = cfg.find("chat_template");
  if (ct == cfg.end() || ct->is_null()) return;
  if (ct->is_string()) {
    chat_template_ = ct->get<std::string>();
    return;
  }
  // Newer files: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
  Where wc = w.at("chat_template");
  const json& list = tokjson::require_array(*ct, wc);
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = tokjson::require_object(list[i], wc.at(i));
    if (e.value("name", "") == "default")
      chat_template_ = tokjson::require_string(tokjson::require(e, wc.at(i), "template"), wc.at(i).at("template"));
  }
}

}  // namespace hpcrl::io
