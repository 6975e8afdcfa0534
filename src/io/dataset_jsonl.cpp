// JSONL dataset loading (see dataset_jsonl.h). The file is read whole (GSM8K
// train is 4 MB) and validated row by row before anything is returned, so a
// typo in row 5000 is reported before a run starts, not an hour into it.
#include "hpcrl/io/dataset_jsonl.h"

#include <nlohmann/json.hpp>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::io {
namespace {

using nlohmann::json;

std::string quoted_keys(const json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back("'" + it.key() + "'");
  return keys.empty() ? "none" : str::join(keys, ", ");
}

// `role` is the YAML key that names this field ("prompt", "answer", "response").
const json& require_key(const json& row, const std::string& key, const std::string& role, const std::string& where) {
  auto it = row.find(key);
  if (it != row.end()) return *it;
  std::vector<std::string> keys;
  for (auto k = row.begin(); k != row.end(); ++k) keys.push_back(k.key());
  std::string msg = where + ": missing key '" + key + "' (this row has keys: " + quoted_keys(row);
  std::string guess = str::closest(key, keys);
  if (!guess.empty()) msg += "; did you mean '" + guess + "'?";
  throw InputError(msg + "); set the dataset's `" + role + ":` to the key that holds the " + role +
                   ", or fix the row");
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::string: return "a string";
    default: return "a number";
  }
}

// Prompts and responses must be strings; answers may also be numbers (42, 0.5).
std::string text_of(const json& v, const std::string& key, bool number_ok, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (number_ok && v.is_number_integer()) return std::to_string(v.get<long long>());
  if (number_ok && v.is_number()) return v.dump();
  throw InputError(where + ": key '" + key + "' is " + type_name(v) + ", expected a string" +
                   (number_ok ? " or a number" : "") + "; fix the row or point the dataset at another key");
}

std::string gold_answer(const std::string& field, const std::string& marker, const std::string& key,
                        const std::string& where) {
  if (marker.empty()) return str::trim(field);
  size_t p = field.rfind(marker);
  if (p == std::string::npos) return str::trim(field);
  std::string after = str::trim(field.substr(p + marker.size()));
  if (after.empty()) {
    throw InputError(where + ": key '" + key + "' has '" + marker +
                     "' with nothing after it; write the final answer after the marker, e.g. '" + marker + " 42'");
  }
  return after;
}

// A conversation row: its messages (parsed again keeping their keys' order, which a written call keeps), and
// its answer when it has one.
void read_conversation_row(const std::string& line, const json& row, const JsonlOptions& options,
                           const std::string& where, Example& ex) {
  require_key(row, options.messages_key, "messages", where);
  const auto ordered = nlohmann::ordered_json::parse(line);
  read_conversation(ordered[options.messages_key], options.conversation, where + ": key '" + options.messages_key + "'",
                    ex);
  if (row.contains(options.answer_key))
    ex.answer = gold_answer(text_of(row[options.answer_key], options.answer_key, true, where), options.answer_marker,
                            options.answer_key, where);
}

}  // namespace

Dataset load_jsonl(const std::string& path, const JsonlOptions& options) {
  std::string content = fs::read_file(path, "dataset");
  if (content.compare(0, 3, "\xEF\xBB\xBF") == 0) content.erase(0, 3);  // UTF-8 BOM
  Dataset ds;
  ds.name = path;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t eol = content.find('\n', pos);
    std::string line = content.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? content.size() : eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (str::trim(line).empty()) {
      ++ds.report.blank_lines;
      continue;
    }
    std::string where = path + ":" + std::to_string(line_no);
    const json row = json_errors::parse_jsonl_line(
        line, path, size_t(line_no),
        "{\"" + options.prompt_key + "\": \"...\", \"" + options.answer_key + "\": \"...\"}");
    if (!row.is_object()) {
      throw InputError(where + ": expected a JSON object, got " + std::string(type_name(row)) +
                       "; each line must be one object like {\"" + options.prompt_key + "\": \"...\", \"" +
                       options.answer_key + "\": \"...\"}");
    }
    Example ex;
    ex.line = line_no;
    if (!options.messages_key.empty()) {
      read_conversation_row(line, row, options, where, ex);
      ds.examples.push_back(std::move(ex));
      continue;
    }
    ex.prompt = text_of(require_key(row, options.prompt_key, "prompt", where), options.prompt_key, false, where);
    std::string answer_field =
        text_of(require_key(row, options.answer_key, "answer", where), options.answer_key, true, where);
    ex.answer = gold_answer(answer_field, options.answer_marker, options.answer_key, where);
    if (options.response_key.empty()) {
      ex.response = answer_field;
    } else {
      ex.response = text_of(require_key(row, options.response_key, "response", where), options.response_key, false,
                            where);
    }
    ds.examples.push_back(std::move(ex));
  }
  if (ds.examples.empty()) {
    throw InputError(path + ": empty dataset (" + std::to_string(line_no) +
                     " lines, no JSON rows); expected one JSON object per line with keys '" + options.prompt_key +
                     "' and '" + options.answer_key + "'");
  }
  ds.report.rows = ds.examples.size();
  apply_length_limits(ds, options.limits);
  return ds;
}

}  // namespace hpcrl::io
