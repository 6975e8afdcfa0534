// The engine's turn handler over real tools (rollout/turns.h): a row's turn
// ends when the model's text since its last reply ends with the call format's
// close tag; the call is parsed, run by a worker thread (so the engine keeps
// decoding the other rows), and its result — or error — comes back as the
// reply tokens the template wraps it in, cut to the reply-token limit. A row
// past its turn limit ends ("turns"); an instant tool (the calculator) runs at
// once on the engine's thread, so its reply is ready at the next iteration on
// any machine and a run repeats exactly; a failing call (malformed, unknown tool,
// tool error, timeout) gives the row an error observation, or ends it
// ("tool_error", scored 0), as configured. An environment's first call of a
// trajectory resets its episode first; its reply's reward goes with the reply
// (Sample::turn_reward), and "done" ends the row ("done"). Per-trajectory
// counts feed the metrics; every call is a rollout/tool span on the trace's
// tools lane.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/tools/tool.h"
#include "hpcrl/tools/tool_call.h"

namespace hpcrl::io {
class Tokenizer;
}

namespace hpcrl::tools {

struct ToolLimits {
  int64_t max_turns = 4;         // calls per trajectory; the next one ends the row ("turns")
  int64_t reply_tokens = 256;    // a tool's result is cut to this many tokens (the template's wrapping is extra)
  double call_seconds = 10;      // per call; longer is an error
  bool end_on_error = false;     // a failed call ends the row ("tool_error") instead of an error observation
  int64_t concurrency = 64;      // calls running at once (worker threads)
};

// What the tools did in one generation call.
struct ToolCounts {
  int64_t calls = 0, errors = 0;  // errors: malformed calls, unknown tools, tool errors, timeouts
  double seconds = 0;             // summed over calls (they overlap each other and decoding)
};

class ToolTurns : public rollout::TurnHandler {
 public:
  // `tools` are the stage's; `tokenizer` must outlive this. A trajectory is
  // named "<prefix>/<prompt_offset + prompt_index>/<sample_index>" for the tools.
  ToolTurns(std::vector<ToolPtr> tools, ToolCallFormat format, ToolLimits limits, const io::Tokenizer& tokenizer,
            std::string trajectory_prefix, int64_t prompt_offset = 0);
  ~ToolTurns() override;
  ToolTurns(const ToolTurns&) = delete;
  ToolTurns& operator=(const ToolTurns&) = delete;

  bool ends_turn(const rollout::Sample& sample) const override;
  void start(int64_t ticket, const rollout::Sample& sample) override;
  // Rethrows what a tool threw (a command tool that cannot be restarted).
  std::vector<std::pair<int64_t, rollout::TurnReply>> poll(bool wait) override;

  const ToolCounts& totals() const { return totals_; }
  // Name trajectories by these keys (one per prompt of the call, as
  // SamplingParams::prompt_keys) instead of prompt_offset + prompt_index: a
  // sample continued in a later call keeps its trajectory's name.
  void use_prompt_keys(std::vector<int64_t> keys) { prompt_keys_ = std::move(keys); }
  // What an environment's reset tells it of each prompt of the call (one per
  // prompt, in the call's order); needed when a tool is an environment.
  void use_episodes(std::vector<EpisodeStart> episodes) { episodes_ = std::move(episodes); }

 private:
  struct Job {
    int64_t ticket = 0;
    Tool* tool = nullptr;     // null: the call failed before running (error set)
    nlohmann::json arguments;
    CallContext context;
    ToolResult result;        // set by the worker (or at start for a failed parse)
    double start_us = 0, seconds = 0;
    std::exception_ptr thrown;
    bool ends_row = false;    // past the turn limit
    bool done = false;        // run (at start for an instant tool)
  };
  void work();
  void run(Job& job) const;  // calls the tool, timing it
  std::string turn_text(const rollout::Sample& sample) const;  // the model's text since its last reply
  rollout::TurnReply reply_of(Job& job);

  std::vector<ToolPtr> tools_;
  std::vector<std::string> names_;
  const ToolCallFormat format_;
  const ToolLimits limits_;
  const io::Tokenizer& tokenizer_;
  const std::string prefix_;
  const int64_t prompt_offset_;
  std::vector<int64_t> prompt_keys_;  // use_prompt_keys; empty: prompt_offset_ + prompt_index
  std::vector<EpisodeStart> episodes_;  // use_episodes
  std::vector<int32_t> reply_open_, reply_close_;  // the template's wrapping, tokenized once
  ToolCounts totals_;

  std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  std::deque<Job> queue_, done_;
  bool stopping_ = false;
  int64_t idle_ = 0;  // workers waiting for a job
  std::vector<std::thread> workers_;
};

}  // namespace hpcrl::tools
