// A stage's tools from its configuration (stage_toolkit.h).
#include "hpcrl/tools/stage_toolkit.h"

#include "hpcrl/tools/calculator.h"
#include "hpcrl/tools/command_tool.h"
#include "hpcrl/util/error.h"

namespace hpcrl::tools {

namespace {
ToolPtr make_tool(const config::ToolConfig& c) {
  switch (c.type) {
    case config::ToolType::calculator:
      return std::make_shared<Calculator>(c.name);
    case config::ToolType::command:
    case config::ToolType::environment: {
      CommandToolOptions o;
      o.environment = c.type == config::ToolType::environment;
      o.name = c.name;
      o.argv = c.command;
      o.description = c.description;
      o.parameters = nlohmann::ordered_json::parse(c.parameters);
      o.max_reply_bytes = size_t(c.max_reply_bytes);
      o.max_restarts = int(c.max_restarts);
      return std::make_shared<CommandTool>(std::move(o));
    }
  }
  throw InputError("tools." + c.name + ": unknown tool type");
}

ToolCallFormat call_format(const config::StageTools& s) {
  if (s.format == config::ToolFormat::qwen) return ToolCallFormat::qwen();
  ToolCallFormat f;
  f.open = s.open;
  f.close = s.close;
  f.json = s.call == config::ToolCallBody::json;
  f.reply_open = s.reply_open;
  f.reply_close = s.reply_close;
  return f;
}
}  // namespace

nlohmann::ordered_json StageToolkit::schemas() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& t : tools) out.push_back(t->schema());
  return out;
}

nlohmann::ordered_json tool_schemas(const StageToolkit* kit) {
  return kit ? kit->schemas() : nlohmann::ordered_json::array();
}

std::unique_ptr<StageToolkit> stage_toolkit(const config::PipelineConfig& pipeline, const config::StageTools& stage) {
  if (!stage.enabled()) return nullptr;
  auto owned = std::make_unique<StageToolkit>();
  StageToolkit& kit = *owned;
  for (const auto& name : stage.use) {
    const config::ToolConfig* c = pipeline.find_tool(name);
    if (!c) throw InputError("no tool '" + name + "' in the pipeline's tools section");
    kit.tools.push_back(make_tool(*c));
  }
  kit.format = call_format(stage);
  kit.limits.max_turns = stage.max_turns;
  kit.limits.reply_tokens = stage.reply_tokens;
  kit.limits.call_seconds = stage.call_seconds;
  kit.limits.end_on_error = stage.on_error == config::ToolErrorAction::end;
  kit.limits.concurrency = stage.concurrency;
  return owned;
}

}  // namespace hpcrl::tools
