// The `command` reward: one long-lived user program scores samples over a
// JSON-lines protocol on its stdin/stdout (protocol and error kinds in
// command_reward.h). This file is the protocol: request lines, strict reply
// parsing, and messages that say what went wrong with which sample and how to
// fix it. The batching (poll() so that writing requests and reading answers
// never wait on each other, per-answer timeouts) is line_exchange.cpp.
#include "hpcrl/reward/command_reward.h"

#include <poll.h>
#include <pthread.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <sstream>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"
#include "reward/command_reply.h"
#include "reward/line_exchange.h"
#include "reward/subprocess.h"

namespace hpcrl::reward {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kProtocolFix =
    "the program must print exactly one line {\"score\": <number>} per input line, in input order, "
    "flushing after each (Python: print(json.dumps({\"score\": s}), flush=True)); logs belong on stderr";

std::string json_text(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string indented(const std::string& text, const std::string& prefix) {
  std::string out;
  for (const auto& line : str::split(text, '\n')) out += "\n" + prefix + line;
  return out;
}

// Blocks SIGPIPE in this thread while it writes to the program, so a program
// that died turns write() into EPIPE instead of killing hpcrl; a SIGPIPE that
// became pending meanwhile is consumed before the mask is restored. Nothing
// process-wide changes, so MPI's and the user's signal setup stay as they are.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

}  // namespace

CommandReward::CommandReward(CommandRewardConfig config) : config_(std::move(config)) {
  HPCRL_CHECK_INPUT(!config_.argv.empty() && !config_.argv[0].empty(),
                    "rewards." << config_.name << ".command: empty; give the scoring program, e.g. "
                               "`command: \"python3 score.py\"`");
  HPCRL_CHECK_INPUT(config_.timeout_s > 0 && std::isfinite(config_.timeout_s),
                    "rewards." << config_.name << ".timeout_s: " << config_.timeout_s
                               << " is not a positive number of seconds; give e.g. `timeout_s: 30`");
}

CommandReward::~CommandReward() = default;  // ~Subprocess stops and reaps the program
CommandReward::CommandReward(CommandReward&&) noexcept = default;
CommandReward& CommandReward::operator=(CommandReward&&) noexcept = default;

std::string CommandReward::command_line() const {
  const auto& a = config_.argv;
  if (a.size() == 3 && a[0] == "sh" && a[1] == "-c") return a[2];
  std::string out;
  for (const auto& arg : a) {
    bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  return out;
}

int CommandReward::pid() const { return proc_ && proc_->running() ? static_cast<int>(proc_->pid()) : -1; }

void CommandReward::start() {
  stderr_ = std::make_unique<StderrTail>("reward " + config_.name + " stderr: ");
  proc_ = std::make_unique<Subprocess>(config_.argv, "rewards." + config_.name + ".command");
  spdlog::info("reward {}: started `{}` (pid {})", config_.name, command_line(), proc_->pid());
}

std::string CommandReward::request_line(const RewardSample& s, int64_t index) const {
  std::string line = "{\"prompt\": " + json_text(s.prompt) + ", \"response\": " + json_text(s.response) +
                     ", \"answer\": " + json_text(s.answer);
  if (s.metadata)
    line += ", \"metadata\": " + s.metadata->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return line + ", \"index\": " + std::to_string(index) + "}\n";
}

void CommandReward::fail(bool input_error, const std::string& what, const std::string& detail,
                         const std::string& fix) {
  if (proc_) pump_stderr(*proc_, *stderr_);
  std::string tail = stderr_ ? stderr_->text() : "";
  std::ostringstream os;
  os << "rewards." << config_.name << ": the reward program `" << command_line() << "` " << what;
  if (!detail.empty()) os << "\n  " << detail;
  if (tail.empty()) os << "\n  its stderr: (nothing)";
  else os << "\n  its stderr (last lines):" << indented(tail, "    | ");
  os << "\n  fix: " << fix;
  failed_ = what;
  if (proc_) proc_->stop(0.0);
  if (input_error) throw InputError(os.str());
  throw RuntimeError(os.str());
}

void CommandReward::fail_dead(const std::string& event, int64_t index, const std::string& sent, size_t answered,
                              size_t batch) {
  // Collect everything it wrote to stderr (bounded: a grandchild may keep the pipe open).
  auto until = Clock::now() + std::chrono::seconds(2);
  while (proc_->stderr_fd() >= 0 && Clock::now() < until) {
    pollfd p{proc_->stderr_fd(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) pump_stderr(*proc_, *stderr_);
  }
  auto status = proc_->wait_exit(1.0);
  std::string what = (status ? *status : event + " (it is still running)") + " before answering sample " +
                     std::to_string(index) + " (" + std::to_string(answered) + " of " + std::to_string(batch) +
                     " samples of this batch answered)";
  fail(false, what, "sample " + std::to_string(index) + " was: " + truncated(sent),
       "see its stderr above; to reproduce, run the command by hand and paste that line into it; " +
           std::string(kProtocolFix));
}

// The `command` reward's side of one batch's exchange: request lines from the
// samples, scores from the answer lines, and the messages for a broken exchange.
class CommandReward::ScoreBatch final : public LineExchange::Protocol {
 public:
  ScoreBatch(CommandReward& reward, const std::vector<RewardSample>& samples, int64_t base)
      : scores(samples.size()), reward_(reward), samples_(samples), base_(base) {}
  std::string request(size_t k) override { return reward_.request_line(samples_[k], index(k)); }
  void answer(size_t k, const std::string& line) override;
  void broken(const ExchangeFault& fault) override;

  std::vector<double> scores;  // one per sample, set as answers arrive

 private:
  int64_t index(size_t k) const { return base_ + static_cast<int64_t>(k); }
  [[noreturn]] void fail_timeout(const ExchangeFault& fault);

  CommandReward& reward_;
  const std::vector<RewardSample>& samples_;
  const int64_t base_;  // the index of samples_[0]
};

void CommandReward::ScoreBatch::answer(size_t k, const std::string& line) {
  const int64_t i = index(k);
  double score = 0;
  std::string problem = reply_problem(line, i, score);
  if (!problem.empty())
    reward_.fail(true, "answered sample " + std::to_string(i) + " with a line that " + problem,
                 "line: " + truncated(line) + "\n  sample " + std::to_string(i) + " was: " + truncated(request(k)),
                 kProtocolFix);
  scores[k] = score;
}

void CommandReward::ScoreBatch::broken(const ExchangeFault& fault) {
  using Kind = ExchangeFault::Kind;
  const std::string sample = "sample " + std::to_string(index(fault.request));
  switch (fault.kind) {
    case Kind::kLineBeforeRequest:
      reward_.fail(true, "printed a line before it was sent " + sample, "line: " + truncated(fault.text),
                   kProtocolFix);
    case Kind::kExtraOutput:
      reward_.fail(true, "printed more than one line for " + sample, "extra output: " + truncated(fault.text),
                   kProtocolFix);
    case Kind::kRunawayLine:
      reward_.fail(true,
                   "wrote " + std::to_string(fault.text.size()) + " bytes without a newline while answering " +
                       sample,
                   "start of that output: " + truncated(fault.text), kProtocolFix);
    case Kind::kTimeout:
      fail_timeout(fault);
    case Kind::kClosedStdout:
      reward_.fail_dead("closed its standard output", index(fault.request), request(fault.request),
                        fault.answered, fault.batch);
    case Kind::kClosedStdin:
      reward_.fail_dead("closed its standard input", index(fault.request), request(fault.request),
                        fault.answered, fault.batch);
  }
}

void CommandReward::ScoreBatch::fail_timeout(const ExchangeFault& fault) {
  const std::string sample = "sample " + std::to_string(index(fault.request));
  const CommandRewardConfig& config = reward_.config_;
  reward_.fail(false,
               "gave no answer for " + sample + " within timeout_s = " + seconds_text(config.timeout_s) + " s (" +
                   std::to_string(fault.answered) + " of " + std::to_string(fault.batch) +
                   " samples of this batch answered)",
               sample + " was: " + truncated(request(fault.request)),
               "check that the program flushes stdout after each answer (a buffered answer never arrives; Python: "
               "print(..., flush=True) or python3 -u), make it faster, or raise rewards." +
                   config.name + ".timeout_s");
}

std::vector<double> CommandReward::score(const std::vector<RewardSample>& samples) {
  if (!failed_.empty())
    throw RuntimeError("rewards." + config_.name + ": the reward program `" + command_line() +
                       "` was stopped after an earlier error (it " + failed_ + "); fix that error first");
  if (samples.empty()) return {};
  if (!proc_) start();
  SigpipeBlock no_sigpipe;
  // A deadline past steady_clock's range (~292 years of nanoseconds from boot) would wrap to
  // the past and time out at once: a timeout_s that large means "never", so it is clamped.
  const double seconds = std::min(config_.timeout_s, kNeverSeconds);
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  ScoreBatch batch(*this, samples, next_index_);
  LineExchange exchange(*proc_, *stderr_, batch, samples.size(), timeout);
  while (!exchange.all_answered()) exchange.step();
  exchange.expect_no_more_output();
  next_index_ += static_cast<int64_t>(samples.size());
  return std::move(batch.scores);
}

}  // namespace hpcrl::reward
