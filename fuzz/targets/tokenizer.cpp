// tokenizer.json (byte-level BPE, added tokens, normalizer, pre-tokenizer
// regexes, post-processor) and tokenizer_config.json (special tokens, chat
// template) loaded, then a text encoded with it and ids decoded. Input:
// tokenizer.json, a NUL byte, tokenizer_config.json (empty: none), a NUL byte, the text.
#include <cstdio>

#include "fuzz_util.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [json, rest] = hpcrl::fuzz::split_at_nul(hpcrl::fuzz::as_text(data, size));
  auto [config, text] = hpcrl::fuzz::split_at_nul(rest);
  hpcrl::fuzz::write_scratch("tokenizer.json", json);
  const std::string config_path = hpcrl::fuzz::scratch_dir() + "/tokenizer_config.json";
  if (config.empty()) std::remove(config_path.c_str());
  else hpcrl::fuzz::write_scratch("tokenizer_config.json", config);
  std::unique_ptr<hpcrl::io::Tokenizer> tok;
  try {
    tok = hpcrl::io::load_tokenizer(hpcrl::fuzz::scratch_dir());
  } catch (const hpcrl::InputError&) {
    return 0;
  }
  std::vector<int32_t> ids;
  try {
    ids = tok->encode(std::string(text), /*add_special=*/true);
  } catch (const hpcrl::InputError&) {  // text that is not UTF-8
  }
  (void)tok->decode(ids);
  (void)tok->decode(ids, /*skip_special=*/true);
  // Ids from the text's bytes, in and out of the vocabulary.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    raw.push_back(static_cast<int32_t>(static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) - 300);
  (void)tok->decode(raw);
  (void)tok->pieces(raw);
  return 0;
}
