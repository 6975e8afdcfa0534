// The top-level `tools:` section (named tools: calculator, command) and a
// stage's `tools:` key (which tools its rollouts call, the limits, and how the
// model writes a call). docs/tools.md and docs/config.md describe every key.
#include <nlohmann/json.hpp>

#include "config/schema_sections.h"

namespace hpcrl::config::schema {

namespace {
Codec<ToolConfig> tool_codec() {
  using S = ToolConfig;
  // An environment is a command tool speaking the environment form of the protocol (docs/tools.md).
  auto command = [](const S& s) { return s.type == ToolType::command || s.type == ToolType::environment; };
  StructSpec<S> spec{"a tool", {
      field<S>("type", [](auto& s) -> auto& { return s.type; }, enumeration<ToolType>(), kRequired),
      only_if<S>(field<S>("command", [](auto& s) -> auto& { return s.command; }, command_codec()), command),
      only_if<S>(field<S>("description", [](auto& s) -> auto& { return s.description; }, text()), command),
      only_if<S>(field<S>("parameters", [](auto& s) -> auto& { return s.parameters; }, text()), command),
      only_if<S>(field<S>("max_reply_bytes", [](auto& s) -> auto& { return s.max_reply_bytes; }, integer(1, 1 << 26)),
                 command),
      only_if<S>(field<S>("max_restarts", [](auto& s) -> auto& { return s.max_restarts; }, integer(0, 1000)), command),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    const bool program = s.type == ToolType::command || s.type == ToolType::environment;
    if (program && !n.find("command"))
      reading.error(n.pos, join_path(path, "command"),
                    "missing: a tool of type " + to_string(s.type) + " needs the program to run",
                    "add `command: \"python3 tool.py\"`");
    if (!program)
      for (const char* key : {"command", "description", "parameters", "max_reply_bytes", "max_restarts"})
        if (n.find(key))
          error_at_key(reading, n, path, key,
                       "applies only to type: command or environment (the calculator has its own)", "remove it");
    const auto parameters = nlohmann::json::parse(s.parameters, nullptr, false);
    if (parameters.is_discarded() || !parameters.is_object())
      error_at_key(reading, n, path, "parameters", "is not a JSON object (the JSON schema of the tool's arguments)",
                   "write e.g. `parameters: '{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}}'`");
  };
  return structure<S>(std::move(spec));
}
}  // namespace

Codec<std::vector<ToolConfig>> tools_codec() { return named_map(tool_codec(), "tool", "<tool>"); }

Codec<StageTools> stage_tools_codec() {
  using S = StageTools;
  auto tags = [](const S& s) { return s.format == ToolFormat::tags; };
  StructSpec<S> spec{"a stage's tool use", {
      field<S>("use", [](auto& s) -> auto& { return s.use; }, list_of(name_ref(), 1, SIZE_MAX, true), kRequired),
      field<S>("max_turns", [](auto& s) -> auto& { return s.max_turns; }, integer(1, 1000)),
      field<S>("reply_tokens", [](auto& s) -> auto& { return s.reply_tokens; }, integer(1, 2000)),
      field<S>("call_seconds", [](auto& s) -> auto& { return s.call_seconds; }, number(0, 3600, Bound::kOpen)),
      field<S>("on_error", [](auto& s) -> auto& { return s.on_error; }, enumeration<ToolErrorAction>()),
      field<S>("format", [](auto& s) -> auto& { return s.format; }, enumeration<ToolFormat>()),
      only_if<S>(field<S>("call", [](auto& s) -> auto& { return s.call; }, enumeration<ToolCallBody>()), tags),
      only_if<S>(field<S>("open", [](auto& s) -> auto& { return s.open; }, text()), tags),
      only_if<S>(field<S>("close", [](auto& s) -> auto& { return s.close; }, text()), tags),
      only_if<S>(field<S>("reply_open", [](auto& s) -> auto& { return s.reply_open; }, text(true)), tags),
      only_if<S>(field<S>("reply_close", [](auto& s) -> auto& { return s.reply_close; }, text(true)), tags),
      field<S>("concurrency", [](auto& s) -> auto& { return s.concurrency; }, integer(1, 4096)),
  }};
  spec.scalar_key = "use";  // `tools: calculator` gets the hint `tools: {use: calculator}`
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    const bool tags = s.format == ToolFormat::tags;
    if (tags)
      for (const char* key : {"open", "close"})
        if (!n.find(key))
          reading.error(n.pos, join_path(path, key), "missing: format: tags needs the call's tags",
                        "add e.g. `open: \"<calc>\", close: \"</calc>\"`");
    if (!tags)
      for (const char* key : {"call", "open", "close", "reply_open", "reply_close"})
        if (n.find(key))
          error_at_key(reading, n, path, key, "applies only to format: tags (format: qwen has Qwen's own)",
                       "remove it or set `format: tags`");
    if (s.call == ToolCallBody::text && s.use.size() != 1)
      error_at_key(reading, n, path, "call",
                   "call: text passes the text between the tags to the stage's one tool, but it uses " +
                       std::to_string(s.use.size()),
                   "use one tool, or `call: json` ({\"name\": ..., \"arguments\": ...} between the tags)");
  };
  return structure<S>(std::move(spec));
}

}  // namespace hpcrl::config::schema
