// model.safetensors.index.json reading and writing (see io/safetensors_index.h).
#include "hpcrl/io/safetensors_index.h"

#include <cmath>
#include <cstdio>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"

namespace hpcrl::io {
namespace {

using json = nlohmann::json;

const std::string kFix = " (fix the index or re-save the checkpoint)";

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw InputError(path + ": " + message + kFix);
}

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// A shard must be a plain file name beside the index.
bool is_bare_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\\') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

uint64_t parse_total_size(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  // Some exporters write total_size as a float; accept it when it is a whole number.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && d < 1.8e19 && std::floor(d) == d) return static_cast<uint64_t>(d);
  }
  fail(path, "metadata.total_size must be a non-negative integer, got " + show(v));
}

}  // namespace

std::string shard_file_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index, count);
  return buf;
}

ShardIndex read_shard_index(const std::string& path) {
  std::string text = fs::read_file(path, "checkpoint index");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(path + ":" + json_errors::line_col(text, json_errors::offset(e, text)),
         "not valid JSON (" + json_errors::problem(e) + ")");
  }
  if (!j.is_object()) fail(path, std::string("must be a JSON object, got ") + j.type_name());

  ShardIndex index;
  if (auto m = j.find("metadata"); m != j.end() && !m->is_null()) {
    if (!m->is_object()) fail(path, std::string("\"metadata\" must be an object, got ") + m->type_name());
    for (const auto& [k, v] : m->items()) {
      if (k == "total_size")
        index.total_size = parse_total_size(v, path);
      else
        index.extra_metadata[k] = v;
    }
  }
  auto wm = j.find("weight_map");
  if (wm == j.end()) fail(path, "missing \"weight_map\" (the map from tensor name to shard file)");
  if (!wm->is_object()) fail(path, std::string("\"weight_map\" must be an object, got ") + wm->type_name());
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string() || !is_bare_file_name(file.get<std::string>()))
      fail(path,
           "weight_map['" + name + "'] must be the file name of a shard in the same directory, got " + show(file));
    index.weight_map[name] = file.get<std::string>();
  }
  if (index.weight_map.empty()) fail(path, "\"weight_map\" lists no tensors");
  return index;
}

void write_shard_index(const std::string& path, const ShardIndex& index) {
  json j;  // nlohmann's json sorts keys, matching HF's json.dumps(sort_keys=True)
  j["metadata"] = index.extra_metadata.is_object() ? index.extra_metadata : json::object();
  j["metadata"]["total_size"] = index.total_size;
  j["weight_map"] = json::object();
  for (const auto& [name, file] : index.weight_map) j["weight_map"][name] = file;
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const json::exception& e) {
    throw InputError(path + ": cannot write the index: " + e.what() + " (tensor and file names must be UTF-8)");
  }
  fs::write_file_atomic(path, text);
}

}  // namespace hpcrl::io
