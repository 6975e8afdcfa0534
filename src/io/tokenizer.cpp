// Tokenizer loading by name or path, and what all tokenizers share (see tokenizer.h).
#include "hpcrl/io/tokenizer.h"

#include <filesystem>

#include "hpcrl/io/tokenizer_byte.h"
#include "hpcrl/util/error.h"
#include "io/tokenizer_bpe.h"

namespace hpcrl::io {

std::vector<std::string> Tokenizer::pieces(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(id_to_token(id));
  return out;
}

std::string configured_tokenizer_spec(const std::string& configured) {
  return configured == "byte" || configured.empty() ? "builtin" : configured;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  namespace stdfs = std::filesystem;
  // "byte" as in the pipeline's `tokenizer: byte`; "builtin" is its older command-line name.
  if (spec == "byte" || spec == "builtin") return std::make_unique<ByteTokenizer>();
  const char* usage = "pass a directory holding tokenizer.json, a tokenizer.json file, or 'byte' (the built-in byte "
                      "tokenizer)";
  std::error_code ec;
  stdfs::path path(spec);
  if (!stdfs::exists(path, ec)) throw InputError("tokenizer '" + spec + "' does not exist: " + usage);
  stdfs::path json_path = path, dir = path.parent_path();
  if (stdfs::is_directory(path, ec)) {
    json_path = path / "tokenizer.json";
    dir = path;
    if (!stdfs::exists(json_path, ec)) {
      std::string hint = stdfs::exists(path / "tokenizer.model", ec) || stdfs::exists(path / "vocab.json", ec)
                             ? " (only the slow-tokenizer files are there: write tokenizer.json with transformers' "
                               "AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"
                             : "";
      throw InputError("tokenizer directory " + spec + " has no tokenizer.json" + hint + "; " + usage);
    }
  }
  stdfs::path config = dir / "tokenizer_config.json";
  return BpeTokenizer::load(json_path.string(), stdfs::exists(config, ec) ? config.string() : "");
}

}  // namespace hpcrl::io
