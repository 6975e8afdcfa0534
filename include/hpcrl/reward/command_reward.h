// The `command` reward: scores come from a user program (a code sandbox, an
// LLM judge, any script) — hpcrl's analogue of veRL's custom reward function.
//
//   rewards:
//     judge: {type: command, command: "python3 judge.py", timeout_s: 30}
//
// The program is started once, on first use, and then lives as long as the
// reward. Protocol (docs/rewards.md, "Command rewards"):
//   hpcrl → stdin,  one line per sample:
//     {"prompt": "...", "response": "...", "answer": "...", "metadata": {...}, "index": n}
//     (metadata only when the caller has some; index counts samples from 0 over
//     the program's lifetime; invalid UTF-8 in the texts becomes U+FFFD)
//   program → stdout, one line per sample, in the same order:
//     {"score": <finite number>}       (other keys are ignored; an "index" key,
//                                      when present, must equal the sample's)
// A bare number, a blank line or a stray log line on stdout is an error (a
// debug print must not become a score); logs belong on stderr, whose last
// lines every error quotes (and `--log-level debug` shows live).
//
// A batch is streamed: all request lines are written while answers are read
// (poll on both pipes), so neither side can block on a full pipe, and a
// program may read ahead. timeout_s bounds the wait for each answer: it runs
// from the previous answer (or the start of the batch).
//
// Errors name the reward, the command, the sample index, the line at fault and
// the program's stderr tail, and say what to fix:
//   cannot start / malformed reply / non-numeric score / wrong index → InputError
//   program exited or closed a pipe / timeout                      → RuntimeError
// After an error the program is stopped and the reward refuses further use.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hpcrl::reward {

class Subprocess;
class StderrTail;

// Timeouts above this many seconds (31.7 years) wait without a limit: a deadline of
// now + 1e10 s would overflow the clock (docs/rewards.md).
inline constexpr double kNeverSeconds = 1e9;

struct CommandRewardConfig {
  std::string name;               // the YAML reward name ("judge"); messages say rewards.<name>
  std::vector<std::string> argv;  // program + arguments; argv[0] without '/' is looked up on PATH
  double timeout_s = 30.0;        // > 0: longest wait for one answer; above kNeverSeconds: no limit
};

// One sample to score; the views must outlive the score() call.
struct RewardSample {
  std::string_view prompt, response, answer;
  const nlohmann::json* metadata = nullptr;  // sent as "metadata" when non-null
  double environment = 0;  // the rewards the trajectory's environment answered with (type: environment rewards)
};

class CommandReward {
 public:
  // InputError for an empty argv or timeout_s ≤ 0. Does not start the program.
  explicit CommandReward(CommandRewardConfig config);
  // Stops the program (EOF on stdin, then SIGTERM/SIGKILL to its process group) and reaps it.
  ~CommandReward();
  CommandReward(const CommandReward&) = delete;
  CommandReward& operator=(const CommandReward&) = delete;
  CommandReward(CommandReward&&) noexcept;
  CommandReward& operator=(CommandReward&&) noexcept;

  // One score per sample, in order. Starts the program on first use.
  std::vector<double> score(const std::vector<RewardSample>& samples);

  const CommandRewardConfig& config() const { return config_; }
  // How messages show the command: the sh -c script, or the argv joined.
  std::string command_line() const;
  // The "index" the next sample will get (= samples answered so far).
  int64_t next_index() const { return next_index_; }
  // The program's pid while it runs, -1 before it starts and after it stopped.
  int pid() const;

 private:
  class ScoreBatch;  // one batch's requests, answers and messages (command_reward.cpp)

  void start();
  [[noreturn]] void fail(bool input_error, const std::string& what, const std::string& detail,
                         const std::string& fix);
  [[noreturn]] void fail_dead(const std::string& event, int64_t index, const std::string& sent,
                              size_t answered, size_t batch);
  std::string request_line(const RewardSample& s, int64_t index) const;

  CommandRewardConfig config_;
  std::unique_ptr<Subprocess> proc_;
  std::unique_ptr<StderrTail> stderr_;
  int64_t next_index_ = 0;
  std::string failed_;  // the error that stopped the program ("" while usable)
};

}  // namespace hpcrl::reward
