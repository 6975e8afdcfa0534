// The `command` tool: a tool whose calls a user program answers — a code
// sandbox, a search client, a game — the tool-side sibling of the `command`
// reward (hpcrl/reward/command_reward.h), over the same kind of child process.
//
// The program is started on the first call (constructing spawns nothing) and
// then lives as long as the tool: one long-lived process per CommandTool.
// Protocol, one JSON object per line each way:
//   hpcrl → stdin:   {"id": <int64>, "trajectory": "<CallContext::trajectory>",
//                     "name": "<tool name>", "arguments": <the call's arguments>}
//   program → stdout: {"id": <the request's id>, "content": "<text>"}
//                  or {"id": <the request's id>, "error": "<text>"}
// Several calls may be in flight at once (call() runs on several threads);
// replies may come in any order and are matched by id, so a program may answer
// them concurrently. Logs belong on stderr, whose last lines the messages quote
// (and `--log-level debug` shows live). Invalid UTF-8 sent becomes U+FFFD.
//
// What a call returns (it never throws for what the program or the model did):
//   "content"                      → the text (error = false)
//   "error", or a content over max_reply_bytes → an error result naming the tool
//   no reply within CallContext::timeout → an error result; a late reply to that id
//                                      is dropped, the program keeps running
//   the program exits / crashes    → every call sent to it gets an error result
//                                      saying how it ended and its stderr tail;
//                                      the next call restarts it
//   a line that is not a reply (not JSON — invalid UTF-8 included —, no integer
//   "id", neither a string "content" nor "error"), or more than a line's cap of
//   output without a newline       → the program is killed (a restart), the calls
//                                      sent to it get an error result quoting the
//                                      line's first 200 bytes
// A program that has needed more than max_restarts restarts is broken, not
// unlucky: the next call throws InputError naming the tool, the command and the
// program's last stderr lines, and so does every later call.
//
// With `environment` (a tool of type environment, docs/tools.md "Environments")
// the same program speaks the environment form: a trajectory's first call is
// preceded by a reset, and every call is a step of the episode:
//   hpcrl → stdin:   {"id": …, "type": "reset", "trajectory": …, "name": …,
//                     "prompt": "<the example's prompt>", "answer": "<its gold answer>"}
//   program → stdout: {"id": …} (anything else it says is ignored) or {"id": …, "error": …}
//   hpcrl → stdin:   {"id": …, "type": "step", "trajectory": …, "name": …, "action": <the call's arguments>}
//   program → stdout: {"id": …, "observation": "<text>", "reward": <number>, "done": <bool>}
//                  or {"id": …, "error": "<text>"}
// "reward" (default 0) adds to the trajectory's environment reward; "done":
// true ends the trajectory there. A reset's error fails the step that follows it.
//
// The destructor stops the program (stdin closed, a short grace, then SIGTERM
// and SIGKILL to its process group) and reaps it: no orphan, no zombie.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/tools/tool.h"

namespace hpcrl::tools {

struct CommandToolOptions {
  std::string name;               // the function name the model calls
  std::vector<std::string> argv;  // program + arguments; argv[0] without '/' is looked up on PATH
  std::string description;        // what the model's chat template shows
  // JSON schema of the arguments (an object schema).
  nlohmann::ordered_json parameters = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
  // Longest "content" / "error" text of one reply; a reply line may be up to
  // 6 × this + 4 KiB (room for JSON escapes), more without a newline is a runaway.
  size_t max_reply_bytes = 65536;
  int max_restarts = 3;  // restarts after the program died or was killed; more → InputError
  bool environment = false;  // the environment form of the protocol (above)
};

class CommandTool final : public Tool {
 public:
  // InputError when the options cannot work (no name, no program, a zero cap).
  explicit CommandTool(CommandToolOptions options);
  ~CommandTool() override;
  CommandTool(const CommandTool&) = delete;
  CommandTool& operator=(const CommandTool&) = delete;

  const std::string& name() const override { return options_.name; }
  bool environment() const override { return options_.environment; }
  nlohmann::ordered_json schema() const override;
  // Thread-safe. Throws InputError only once the program needed more than
  // max_restarts restarts (or cannot be started at all).
  ToolResult call(const nlohmann::json& arguments, const CallContext& context) override;

  // The running program's pid (nullopt before the first call and between a
  // death and the restart); for tests and logs.
  std::optional<pid_t> pid() const;
  // How many times the program was restarted.
  int restarts() const;

 private:
  struct Channel;
  // One request (its fields but the id) and its reply within the timeout.
  ToolResult exchange(const nlohmann::ordered_json& fields, std::chrono::milliseconds timeout);
  CommandToolOptions options_;
  std::unique_ptr<Channel> channel_;
};

}  // namespace hpcrl::tools
