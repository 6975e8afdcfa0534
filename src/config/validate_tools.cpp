// What a pipeline's tools and its stages' tool use must satisfy before a run
// (passes.h): every tool a stage uses exists, a reply can fit the response,
// and the combinations multi-turn rollouts do not support yet are refused with
// the reason; a tool no stage uses is a warning.
#include <nlohmann/json.hpp>

#include <set>

#include "config/passes.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

namespace {
// A reply of up to reply_tokens must leave room for the model's tokens within `max_new_tokens` (named by `what`).
void reply_fits(const PipelineConfig& c, const StageTools& t, int64_t max_new_tokens, const std::string& what,
                const std::string& tp, Diagnostics& diag) {
  if (t.reply_tokens < max_new_tokens) return;
  diag.error(c.pos(tp + ".reply_tokens"), tp + ".reply_tokens",
             "a reply of up to " + std::to_string(t.reply_tokens) + " tokens leaves no room in " + what + " " +
                 std::to_string(max_new_tokens) + " (which bounds the whole trajectory: the model's tokens and the replies)",
             "raise " + what + " or lower tools.reply_tokens");
}

// The stage's tools exist, and a reply fits its evaluations' responses.
void check_tools(const PipelineConfig& c, const StageTools& t, const std::string& tp, Diagnostics& diag) {
  std::vector<std::string> known;
  for (const auto& tool : c.tools) known.push_back(tool.name);
  for (const auto& name : t.use) {
    const ToolConfig* tool = c.find_tool(name);
    if (!tool)
      diag.error(c.pos(tp + ".use"), tp + ".use", "no tool '" + name + "'", name_fix(name, known, "tools"));
    else if (tool->type == ToolType::environment && t.use.size() > 1)
      diag.error(c.pos(tp + ".use"), tp + ".use",
                 "tool '" + name + "' is an environment: it drives the whole conversation (its episode starts at "
                 "the trajectory's first call), so it is the stage's only tool",
                 "list it alone in use:, or make the other tools part of the environment's program");
  }
  reply_fits(c, t, c.run.eval_sampling.max_new_tokens, "run.eval_sampling.max_new_tokens", tp, diag);
}

// A conversation dataset's tool messages are wrapped as the stage's format inserts a reply, or the model learns
// a wrapping its rollouts never show it.
void check_conversation_replies(const PipelineConfig& c, const StageTools& t, const std::string& data,
                                const std::string& tp, Diagnostics& diag) {
  const DatasetConfig* d = c.find_data(data);
  if (!d || d->kind != DataKind::jsonl || d->jsonl.messages.empty()) return;
  const bool qwen = t.format == ToolFormat::qwen;
  const std::string open = qwen ? kQwenToolReplyOpen : t.reply_open, close = qwen ? kQwenToolReplyClose : t.reply_close;
  if (d->jsonl.tool_reply_open == open && d->jsonl.tool_reply_close == close) return;
  const std::string key = "data." + data + ".jsonl.tool_reply_open";
  const auto json_quote = [](const std::string& text) { return nlohmann::json(text).dump(); };  // \n shown as such
  diag.error(c.pos(key), key,
             "data." + data + " wraps its tool messages in " + json_quote(d->jsonl.tool_reply_open) + " … " +
                 json_quote(d->jsonl.tool_reply_close) + ", but " + tp + " (format " + (qwen ? "qwen" : "tags") +
                 ") inserts a reply as " + json_quote(open) + " … " + json_quote(close) +
                 ": the model would learn a wrapping its rollouts never show it",
             "set data." + data + ".jsonl.tool_reply_open/tool_reply_close to the stage's, or change its tools.format");
}

void check_stage(const PipelineConfig& c, const RlStage& s, const std::string& p, Diagnostics& diag) {
  const std::string tp = p + ".tools";
  reply_fits(c, s.tools, s.sampling.max_new_tokens, "max_new_tokens", tp, diag);
}

// An environment reward sums what the stage's environments answered; an environment's rewards need one to count.
void check_environment_rewards(const PipelineConfig& c, const RlStage& s, const std::string& p, Diagnostics& diag) {
  std::string environment;
  for (const auto& name : s.tools.use)
    if (const ToolConfig* t = c.find_tool(name); t && t->type == ToolType::environment) environment = name;
  bool scored = false;
  for (const auto& r : s.rewards) {
    const RewardConfig* rc = c.find_reward(r);
    if (!rc || rc->type != RewardType::environment) continue;
    scored = true;
    if (environment.empty())
      diag.error(c.pos(p + ".reward"), p + ".reward",
                 "reward '" + r + "' is of type environment: it sums the rewards the stage's environment tool "
                 "answers with, and " + p + " uses none",
                 "add a tool of type environment to " + p + ".tools.use, or use another reward");
  }
  if (!environment.empty() && !scored)
    diag.warning(c.pos(p + ".tools.use"), p + ".tools.use",
                 "tool '" + environment + "' is an environment, but no reward of " + p +
                     " is of type environment: the rewards it answers with are not scored",
                 "add a reward `{type: environment}` to the stage's reward list, or ignore this");
}
}  // namespace

void validate_tools(const PipelineConfig& c, Diagnostics& diag) {
  std::set<std::string> used;
  for (size_t i = 0; i < c.stages.size(); ++i) {
    const StageTools* tools = nullptr;
    if (const RlStage* s = c.stages[i].rl()) {
      tools = &s->tools;
      if (tools->enabled()) check_stage(c, *s, c.stages[i].path, diag);
      check_environment_rewards(c, *s, c.stages[i].path, diag);
    } else if (const auto* sft = c.stages[i].as<SftStage>()) {
      tools = &sft->tools;
    }
    if (!tools || !tools->enabled()) continue;
    check_tools(c, *tools, c.stages[i].path + ".tools", diag);
    const auto* sft = c.stages[i].as<SftStage>();
    const std::string& data = sft ? sft->data : c.stages[i].rl()->data;
    check_conversation_replies(c, *tools, data, c.stages[i].path + ".tools", diag);
    used.insert(tools->use.begin(), tools->use.end());
  }
  for (const auto& t : c.tools)
    if (!used.count(t.name))
      diag.warning(c.pos("tools." + t.name), "tools." + t.name, "no stage uses this tool",
                   "remove it or list it in a grpo/ppo stage's `tools: {use: [" + t.name + "]}`");
}

}  // namespace hpcrl::config
