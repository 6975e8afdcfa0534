// The tokenizer a saved model directory carries (see model_tokenizer.h).
#include "hpcrl/config/model_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::config {
namespace {
namespace stdfs = std::filesystem;
using nlohmann::json;

// config.json's object; InputError naming the file when it is not one.
json read_config_json(const std::string& path) {
  const std::string text = fs::read_file(path, "model config");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw InputError(path + ": config.json must be a JSON object");
  return j;
}
}  // namespace

bool is_byte_tokenizer(const std::string& spec) { return spec == kByteTokenizer || spec == "builtin"; }

void record_model_tokenizer(const std::string& dir, const std::string& tokenizer) {
  if (tokenizer.empty() || is_byte_tokenizer(tokenizer)) {
    const std::string path = dir + "/config.json";
    json j = read_config_json(path);
    j[kTokenizerConfigKey] = kByteTokenizer;
    fs::write_file_atomic(path, j.dump(2) + "\n");
    return;
  }
  std::error_code ec;
  const stdfs::path source(tokenizer);
  // A tokenizer.json path names its directory's files (as io::load_tokenizer reads them).
  const bool file = !stdfs::is_directory(source, ec) && source.extension() == ".json";
  const stdfs::path from = file ? source.parent_path() : source;
  const stdfs::path json_file = file ? source : source / "tokenizer.json";
  if (!stdfs::is_regular_file(json_file, ec))
    throw InputError("cannot copy the tokenizer into " + dir + ": " + json_file.string() +
                     " does not exist (it was read when the run started; was it moved?)");
  fs::write_file_atomic(dir + "/tokenizer.json", fs::read_file(json_file.string(), "tokenizer"));
  const stdfs::path config = from / "tokenizer_config.json";
  if (stdfs::is_regular_file(config, ec))
    fs::write_file_atomic(dir + "/tokenizer_config.json", fs::read_file(config.string(), "tokenizer config"));
}

std::string recorded_model_tokenizer(const std::string& dir) {
  std::error_code ec;
  if (stdfs::is_regular_file(stdfs::path(dir) / "tokenizer.json", ec)) return dir;
  const std::string path = dir + "/config.json";
  if (!stdfs::is_regular_file(path, ec)) return "";
  const json j = read_config_json(path);
  if (!j.contains(kTokenizerConfigKey)) return "";
  const json& name = j.at(kTokenizerConfigKey);
  if (!name.is_string() || name.get<std::string>() != kByteTokenizer)
    throw InputError(path + ": \"" + kTokenizerConfigKey + "\" is " + name.dump() +
                     ", but the only tokenizer named there is \"byte\" (the built-in byte tokenizer; a file tokenizer "
                     "is a tokenizer.json beside config.json): correct it, or remove the key and pass --tokenizer");
  return kByteTokenizer;
}

}  // namespace hpcrl::config
