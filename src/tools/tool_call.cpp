// Reading a model's tool call (tool_call.h).
#include "hpcrl/tools/tool_call.h"

#include <algorithm>

namespace hpcrl::tools {

namespace {
std::string trim(const std::string& s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t a = 0, b = s.size();
  while (a < b && space(s[a])) ++a;
  while (b > a && space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

std::string quoted(const std::string& s) { return "\"" + (s.size() > 120 ? s.substr(0, 120) + "..." : s) + "\""; }

ParsedCall parse_json_call(const std::string& body, const std::vector<std::string>& tools) {
  ParsedCall call;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    call.error = "the call " + quoted(body) + " is not a JSON object {\"name\": ..., \"arguments\": ...}";
    return call;
  }
  if (!j.contains("name") || !j["name"].is_string()) {
    call.error = "the call " + quoted(body) + " has no \"name\" string";
    return call;
  }
  call.name = j["name"].get<std::string>();
  if (std::find(tools.begin(), tools.end(), call.name) == tools.end()) {
    std::string known;
    for (const auto& t : tools) known += (known.empty() ? "" : ", ") + t;
    call.error = "there is no tool \"" + call.name + "\" (tools: " + known + ")";
    return call;
  }
  call.arguments = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
  if (call.arguments.is_string()) {  // some models write the arguments as a JSON string
    const auto inner = nlohmann::json::parse(call.arguments.get<std::string>(), nullptr, false);
    if (!inner.is_discarded() && inner.is_object()) call.arguments = inner;
  }
  return call;
}
}  // namespace

bool ends_with_call(const std::string& text, const ToolCallFormat& format) {
  const std::string& close = format.close;
  return text.size() >= close.size() && text.compare(text.size() - close.size(), close.size(), close) == 0;
}

ParsedCall parse_call(const std::string& turn, const ToolCallFormat& format, const std::vector<std::string>& tools) {
  ParsedCall call;
  if (!ends_with_call(turn, format)) {
    call.error = "the turn does not end with " + format.close;
    return call;
  }
  const size_t end = turn.size() - format.close.size();
  const size_t open = turn.rfind(format.open, end);
  if (open == std::string::npos || open + format.open.size() > end) {
    call.error = "a call closed with " + format.close + " was never opened with " + format.open;
    return call;
  }
  const std::string body = trim(turn.substr(open + format.open.size(), end - open - format.open.size()));
  if (format.json) return parse_json_call(body, tools);
  call.name = tools.empty() ? "" : tools.front();
  call.arguments = body;
  return call;
}

}  // namespace hpcrl::tools
