// Unicode normalisation for tokenizer.json "normalizer" (see tokenizer_normalizer.h).
#include "io/tokenizer_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "hpcrl/util/check.h"

namespace hpcrl::io {
namespace {

void parse_into(const tokjson::json& j, const tokjson::Where& w, std::vector<int>* forms) {
  tokjson::require_object(j, w);
  std::string type = tokjson::require_string(tokjson::require(j, w, "type"), w.at("type"));
  if (type == "Sequence") {
    auto ws = w.at("normalizers");
    const auto& list = tokjson::require_array(tokjson::require(j, w, "normalizers"), ws);
    for (size_t i = 0; i < list.size(); ++i) parse_into(list[i], ws.at(i), forms);
  } else if (type == "NFC") {
    forms->push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    forms->push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    forms->push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    forms->push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else {
    tokjson::fail(w.at("type"), "normalizer '" + type + "' is not supported",
                  "hpcrl supports byte-level BPE tokenizers whose normalizer is null, NFC, NFD, NFKC, NFKD or a "
                  "Sequence of them (GPT-2, Qwen, Llama-3, DeepSeek); SentencePiece-style tokenizers (Llama-2, "
                  "Mistral v1) are not supported");
  }
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

Normalizer Normalizer::from_json(const tokjson::json& j, const tokjson::Where& w) {
  Normalizer n;
  if (!j.is_null()) parse_into(j, w, &n.forms_);
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  // Every normal form leaves ASCII unchanged; most training text is ASCII.
  if (forms_.empty() || is_ascii(text)) return std::string(text);
  std::string cur(text);
  for (int options : forms_) {
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                      static_cast<utf8proc_ssize_t>(cur.size()), &out,
                                      static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(out, &std::free);
    HPCRL_CHECK(n >= 0, "utf8proc normalisation failed: " << utf8proc_errmsg(n)
                                                          << " (input was validated as UTF-8; report this)");
    cur.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  }
  return cur;
}

}  // namespace hpcrl::io
