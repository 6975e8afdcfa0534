// A tool a multi-turn rollout may call (docs/tools.md): a name, the
// description the model's chat template shows it (the `tools` variable), and
// one call — arguments in, a text result out. The rollout's turn handler
// (tool_turns.h) parses the model's call, runs it off the engine's thread and
// wraps the result for the template; a tool knows nothing of tokens or rows.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace hpcrl::tools {

// What a call gives back: the text the model reads next, or an error.
struct ToolResult {
  std::string text;    // the observation (or, with error, what went wrong: the model sees it too)
  bool error = false;  // malformed arguments, a failure, a timeout, an oversized reply
};

// The call's context: which trajectory asks (a tool may keep state per
// trajectory) and how long it may take.
struct CallContext {
  std::string trajectory;  // stable id of the trajectory (run, iteration, prompt, sample)
  std::chrono::milliseconds timeout{10000};
};

class Tool {
 public:
  virtual ~Tool() = default;
  virtual const std::string& name() const = 0;
  // {"type": "function", "function": {"name", "description", "parameters"}}:
  // the OpenAI/HF form chat templates render from their `tools` variable.
  virtual nlohmann::ordered_json schema() const = 0;
  // Runs one call. May be called from several threads at once; never throws
  // for what the model wrote or the tool did (that is an error result).
  virtual ToolResult call(const nlohmann::json& arguments, const CallContext& context) = 0;
  // A call that takes microseconds and depends on nothing outside (the
  // calculator): the turn handler runs it at once on the engine's thread, so
  // its reply is ready at the next iteration whatever the machine's load, and
  // a run is the same run after run. Others run on worker threads.
  virtual bool instant() const { return false; }
};

using ToolPtr = std::shared_ptr<Tool>;

}  // namespace hpcrl::tools
