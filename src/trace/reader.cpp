// Tolerant reader for Chrome JSON-array traces (see reader.h). The array is
// scanned object by object (brace depth, aware of strings and escapes) instead
// of parsed whole, because a crashed run's file is not valid JSON: it lacks the
// closing ']' and may end inside an event. Each complete object is parsed with
// nlohmann-json; an object still open at end of file is the cut-off event.
#include "hpcrl/trace/reader.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::trace {
namespace {

const char* kFix = "regenerate the trace or move the file out of the trace directory";

// "path:line:col" (1-based) of byte `offset` in `text`.
std::string location(const std::string& text, const std::string& path, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  std::ostringstream os;
  os << path << ":" << line << ":" << col;
  return os.str();
}

[[noreturn]] void fail(const std::string& text, const std::string& path, size_t offset, const std::string& what) {
  throw InputError(location(text, path, offset) + ": " + what + "; " + kFix);
}

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  return i;
}

// Offset just past the '}' matching the '{' at `i`, or npos if the file ends first.
size_t object_end(const std::string& s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string::npos;
}

Event to_event(const nlohmann::json& j, const std::string& text, const std::string& path, size_t offset) {
  if (!j.is_object()) fail(text, path, offset, "trace event is not a JSON object");
  Event e;
  auto get_string = [&](const char* key, std::string& out) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_string()) fail(text, path, offset, std::string("\"") + key + "\" is not a string");
    out = it->get<std::string>();
  };
  auto get_number = [&](const char* key, auto& out, bool required) {
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) fail(text, path, offset, "complete event (\"ph\":\"X\") without \"" + std::string(key) + "\"");
      return;
    }
    if (!it->is_number()) fail(text, path, offset, std::string("\"") + key + "\" is not a number");
    out = it->get<std::decay_t<decltype(out)>>();
  };
  get_string("ph", e.ph);
  if (e.ph.empty()) fail(text, path, offset, "trace event without \"ph\"");
  get_string("name", e.name);
  get_string("cat", e.cat);
  bool complete = e.ph == "X";
  if (complete && !j.contains("name")) fail(text, path, offset, "complete event (\"ph\":\"X\") without \"name\"");
  get_number("pid", e.pid, false);
  get_number("tid", e.tid, false);
  get_number("ts", e.ts_us, complete);
  get_number("dur", e.dur_us, complete);
  if (complete && e.dur_us < 0) fail(text, path, offset, "complete event with negative \"dur\"");
  auto args = j.find("args");
  if (args != j.end() && args->is_object()) {
    for (auto it = args->begin(); it != args->end(); ++it) {
      if (it->is_number()) e.args.emplace_back(it.key(), it->get<double>());
      else if (it.key() == "group" && it->is_string()) e.group = it->get<std::string>();
    }
  }
  return e;
}

}  // namespace

TraceFile parse_trace(const std::string& text, const std::string& path) {
  TraceFile tf;
  tf.path = path;
  size_t i = skip_space(text, 0);
  if (i == text.size()) fail(text, path, i, "empty trace file");
  if (text[i] == '{') {  // object form: only read when complete
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
      fail(text, path, i, "not a Chrome trace (expected a JSON array of events or {\"traceEvents\": [...]})");
    for (const auto& j : doc["traceEvents"]) tf.events.push_back(to_event(j, text, path, i));
    tf.terminated = true;
    tf.valid_end = text.size();
    return tf;
  }
  if (text[i] != '[') fail(text, path, i, "not a Chrome trace (expected '[' to start the array of events)");
  tf.valid_end = ++i;
  bool need_separator = false;
  while (true) {
    i = skip_space(text, i);
    if (i == text.size()) return tf;  // unterminated array: a crashed or still-running writer
    char c = text[i];
    if (c == ']') {
      tf.terminated = true;
      size_t rest = skip_space(text, i + 1);
      if (rest != text.size()) fail(text, path, rest, "content after the closing ']'");
      return tf;
    }
    if (c == ',') {
      if (!need_separator) fail(text, path, i, "unexpected ',' (empty array element)");
      need_separator = false;
      ++i;
      continue;
    }
    if (c != '{') fail(text, path, i, std::string("expected a trace event '{', found '") + c + "'");
    if (need_separator) fail(text, path, i, "missing ',' between trace events");
    size_t end = object_end(text, i);
    if (end == std::string::npos) {  // cut off mid-event
      tf.skipped = 1;
      return tf;
    }
    nlohmann::json j = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(i),
                                              text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    if (j.is_discarded()) fail(text, path, i, "trace event is not valid JSON");
    tf.events.push_back(to_event(j, text, path, i));
    tf.valid_end = end;
    need_separator = true;
    i = end;
  }
}

double arg_value(const Event& e, const char* key) {
  for (const auto& [k, v] : e.args)
    if (k == key) return v;
  return 0;
}

TraceFile read_trace_file(const std::string& path) { return parse_trace(fs::read_file(path, "trace file"), path); }

}  // namespace hpcrl::trace
