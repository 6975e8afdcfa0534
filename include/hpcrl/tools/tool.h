// A tool a multi-turn rollout may call (docs/tools.md): a name, the
// description the model's chat template shows it (the `tools` variable), and
// one call — arguments in, a text result out. The rollout's turn handler
// (tool_turns.h) parses the model's call, runs it off the engine's thread and
// wraps the result for the template; a tool knows nothing of tokens or rows.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace hpcrl::tools {

// What a call gives back: the text the model reads next, or an error.
struct ToolResult {
  std::string text;    // the observation (or, with error, what went wrong: the model sees it too)
  bool error = false;  // malformed arguments, a failure, a timeout, an oversized reply
  double reward = 0;   // an environment's reward for this step (type: environment rewards sum them)
  bool done = false;   // an environment ended the episode: the trajectory ends here ("done")
};

// The start of an environment's episode (a trajectory's first call): what
// `reset` tells the program.
struct EpisodeStart {
  std::string prompt, answer;  // the dataset example's prompt text and gold answer
};

// The call's context: which trajectory asks (a tool may keep state per
// trajectory) and how long it may take.
struct CallContext {
  std::string trajectory;  // stable id of the trajectory (run, iteration, prompt, sample)
  std::chrono::milliseconds timeout{10000};
  std::optional<EpisodeStart> reset;  // an environment's first step of the trajectory: reset before it
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
  // An environment (the environment form of the command protocol): its calls
  // are the steps of an episode that a reset starts, and its replies may carry
  // a reward and end the trajectory.
  virtual bool environment() const { return false; }
};

using ToolPtr = std::shared_ptr<Tool>;

}  // namespace hpcrl::tools
