// The tokenizer a saved model directory carries, so the directory alone serves
// `init: {path: DIR}`, `hpcrl generate/score/eval --model DIR`: a copy of the
// tokenizer files (tokenizer.json, and tokenizer_config.json when the source
// has one), or, for the built-in byte tokenizer, which has no files, its name
// in the directory's config.json:
//
//   {"architectures": ["LlamaForCausalLM"], ..., "hpcrl_tokenizer": "byte"}
//
// `byte` is the one name of the built-in tokenizer (YAML `tokenizer: byte`,
// `--tokenizer byte`; the older command-line name `builtin` is still accepted).
// Torch-free: the config loader resolves a role's tokenizer with it.
#pragma once

#include <string>

namespace hpcrl::config {

inline constexpr const char* kByteTokenizer = "byte";
// The config.json key naming a file-less tokenizer.
inline constexpr const char* kTokenizerConfigKey = "hpcrl_tokenizer";

// Whether `spec` names the built-in byte tokenizer ("byte", or the older "builtin").
bool is_byte_tokenizer(const std::string& spec);

// Records `tokenizer` ("byte", "" = byte, or a directory holding tokenizer.json)
// in model directory `dir`, whose config.json is already written: copies
// tokenizer.json and tokenizer_config.json (when present) into it, or adds
// "hpcrl_tokenizer": "byte" to its config.json. InputError when the source
// directory has no tokenizer.json.
void record_model_tokenizer(const std::string& dir, const std::string& tokenizer);

// The tokenizer model directory `dir` carries: `dir` itself when it holds
// tokenizer.json, "byte" when its config.json names the byte tokenizer, ""
// when it records none. InputError naming config.json when it names a
// tokenizer hpcrl does not have (or is not JSON).
std::string recorded_model_tokenizer(const std::string& dir);

}  // namespace hpcrl::config
