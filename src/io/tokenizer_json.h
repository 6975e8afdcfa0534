// Error reporting for tokenizer.json / tokenizer_config.json: every problem is
// an InputError that names the file, the key path inside it
// ("pre_tokenizer.pretokenizers[0].pattern.Regex") and the fix, so a user
// with a hand-edited or truncated file knows where to look.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace hpcrl::io::tokjson {

using json = nlohmann::json;

// Where in which file a value lives.
struct Where {
  std::string file;
  std::string path;  // "" for the document root
  Where at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  Where at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
};

// InputError "FILE: PATH: PROBLEM. FIX".
[[noreturn]] void fail(const Where& w, const std::string& problem, const std::string& fix);

// Parses a JSON file; InputError with line:col on a syntax error.
json parse_file(const std::string& path);

// obj[key] (which must exist) or InputError naming the missing key and `fix`.
const json& require(const json& obj, const Where& w, const char* key, const std::string& fix = "");

// Typed getters: InputError when the value has another type.
const json& require_object(const json& v, const Where& w);
const json& require_array(const json& v, const Where& w);
std::string require_string(const json& v, const Where& w);
bool optional_bool(const json& obj, const Where& w, const char* key, bool fallback);

// A short rendering of a value for messages (strings quoted, long values cut).
std::string brief(const json& v);

}  // namespace hpcrl::io::tokjson
