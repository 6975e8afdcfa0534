// Error reporting helpers for the tokenizer file parsers (see tokenizer_json.h).
#include "io/tokenizer_json.h"

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"

namespace hpcrl::io::tokjson {

void fail(const Where& w, const std::string& problem, const std::string& fix) {
  std::string msg = w.file + ": ";
  if (!w.path.empty()) msg += w.path + ": ";
  msg += problem;
  if (!fix.empty()) msg += ". " + fix;
  throw InputError(msg);
}

json parse_file(const std::string& path) {
  std::string text = fs::read_file(path, "tokenizer file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string what = json_errors::problem(e);
    auto colon = what.find("]: ");  // drop nlohmann's "[json.exception.parse_error.101] parse error at ..."
    if (colon != std::string::npos) what = what.substr(colon + 3);
    throw InputError(path + ":" + json_errors::line_col(text, json_errors::offset(e, text)) + ": invalid JSON (" + what +
                     "). The file is damaged or truncated: download it again");
  }
}

const json& require(const json& obj, const Where& w, const char* key, const std::string& fix) {
  require_object(obj, w);
  auto it = obj.find(key);
  if (it == obj.end()) fail(w.at(key), "missing", fix);
  return *it;
}

const json& require_object(const json& v, const Where& w) {
  if (!v.is_object()) fail(w, std::string("expected an object, found ") + v.type_name(), "");
  return v;
}

const json& require_array(const json& v, const Where& w) {
  if (!v.is_array()) fail(w, std::string("expected an array, found ") + v.type_name(), "");
  return v;
}

std::string require_string(const json& v, const Where& w) {
  if (!v.is_string()) fail(w, std::string("expected a string, found ") + v.type_name(), "");
  return v.get<std::string>();
}

bool optional_bool(const json& obj, const Where& w, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(w.at(key), std::string("expected true or false, found ") + it->type_name(), "");
  return it->get<bool>();
}

std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace hpcrl::io::tokjson
