// The `command` reward: one long-lived user program scores samples over a
// JSON-lines protocol on its stdin/stdout (protocol and error kinds in
// command_reward.h). This file is the protocol: batching with poll() so that
// writing requests and reading answers never wait on each other, per-answer
// timeouts, strict reply parsing, and messages that say what went wrong with
// which sample and how to fix it.
#include "hpcrl/reward/command_reward.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <sstream>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"
#include "reward/command_reply.h"
#include "reward/subprocess.h"

namespace hpcrl::reward {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxReplyBytes = size_t{1} << 20;  // one answer line; longer is a runaway print

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

std::vector<double> CommandReward::score(const std::vector<RewardSample>& samples) {
  if (!failed_.empty())
    throw RuntimeError("rewards." + config_.name + ": the reward program `" + command_line() +
                       "` was stopped after an earlier error (it " + failed_ + "); fix that error first");
  const size_t n = samples.size();
  std::vector<double> scores(n);
  if (n == 0) return scores;
  if (!proc_) start();
  SigpipeBlock no_sigpipe;
  const int64_t base = next_index_;
  // A deadline past steady_clock's range (~292 years of nanoseconds from boot) would wrap to
  // the past and time out at once: a timeout_s that large means "never", so it is clamped.
  const double seconds = std::min(config_.timeout_s, kNeverSeconds);
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto deadline = Clock::now() + timeout;  // for the oldest unanswered sample
  size_t queued = 0, answered = 0;         // request lines begun / answers read
  std::string out;                         // the request line being written
  size_t out_off = 0;
  std::string in;                          // answer bytes not yet ending in '\n'
  auto sent = [&](size_t k) { return request_line(samples[k], base + static_cast<int64_t>(k)); };

  size_t written = 0;                      // request lines completely written
  bool input_closed = false;               // the program closed its stdin (EPIPE)

  // Reads what the program has written so far; false once it closed stdout.
  auto read_available = [&] {
    char buf[65536];
    while (true) {
      ssize_t got = ::read(proc_->stdout_fd(), buf, sizeof buf);
      if (got > 0) {
        in.append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // 0 bytes or an error: closed
    }
  };
  // Turns complete lines into scores.
  auto take_answers = [&] {
    size_t start = 0;
    for (size_t nl = in.find('\n'); nl != std::string::npos; nl = in.find('\n', start)) {
      std::string line = in.substr(start, nl - start);
      start = nl + 1;
      const int64_t index = base + static_cast<int64_t>(answered);
      if (answered >= queued)
        fail(true, "printed a line before it was sent sample " + std::to_string(index),
             "line: " + truncated(line), kProtocolFix);
      double score = 0;
      std::string problem = reply_problem(line, index, score);
      if (!problem.empty())
        fail(true, "answered sample " + std::to_string(index) + " with a line that " + problem,
             "line: " + truncated(line) + "\n  sample " + std::to_string(index) + " was: " + truncated(sent(answered)),
             kProtocolFix);
      scores[answered++] = score;
      deadline = Clock::now() + timeout;
      if (answered == n && nl + 1 < in.size())
        fail(true, "printed more than one line for sample " + std::to_string(index),
             "extra output: " + truncated(in.substr(nl + 1)), kProtocolFix);
    }
    in.erase(0, start);
    if (in.size() > kMaxReplyBytes)
      fail(true, "wrote " + std::to_string(in.size()) + " bytes without a newline while answering sample " +
                     std::to_string(base + static_cast<int64_t>(answered)),
           "start of that output: " + truncated(in), kProtocolFix);
  };
  auto died = [&](const std::string& event) {
    fail_dead(event, base + static_cast<int64_t>(answered), sent(answered), answered, n);
  };

  while (answered < n) {
    if (out_off == out.size() && queued < n && !input_closed) {
      out = sent(queued++);
      out_off = 0;
    }
    const bool want_write = !input_closed && out_off < out.size();
    pollfd fds[3] = {{proc_->stdout_fd(), POLLIN, 0},
                     {proc_->stderr_fd(), POLLIN, 0},
                     {want_write ? proc_->stdin_fd() : -1, POLLOUT, 0}};
    const auto now = Clock::now();
    if (now >= deadline) {
      const int64_t index = base + static_cast<int64_t>(answered);
      fail(false,
           "gave no answer for sample " + std::to_string(index) + " within timeout_s = " +
               seconds_text(config_.timeout_s) + " s (" + std::to_string(answered) + " of " + std::to_string(n) +
               " samples of this batch answered)",
           "sample " + std::to_string(index) + " was: " + truncated(sent(answered)),
           "check that the program flushes stdout after each answer (a buffered answer never arrives; Python: "
           "print(..., flush=True) or python3 -u), make it faster, or raise rewards." +
               config_.name + ".timeout_s");
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    int r = ::poll(fds, 3, static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    HPCRL_CHECK(r >= 0, "poll: " << std::strerror(errno));
    if (r == 0) continue;
    if (fds[1].revents) pump_stderr(*proc_, *stderr_);
    if (fds[2].revents) {
      ssize_t w = ::write(proc_->stdin_fd(), out.data() + out_off, out.size() - out_off);
      if (w > 0) {
        out_off += static_cast<size_t>(w);
        if (out_off == out.size()) ++written;
      } else if (w < 0 && errno == EPIPE) {
        // Usually it exited: keep reading, so answers already in the pipe count and the
        // message names the sample it really stopped at.
        proc_->close_stdin();
        input_closed = true;
      } else {
        HPCRL_CHECK(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR),
                    "write to the reward program: " << std::strerror(errno));
      }
    }
    bool open = true;
    if (fds[0].revents || input_closed) {
      open = read_available();
      take_answers();
    }
    if (!open && answered < n) died("closed its standard output");
    if (input_closed && answered >= written && answered < n) died("closed its standard input");
  }
  if (!in.empty())  // a partial line after the last answer would become the next batch's first answer
    fail(true, "printed more than one line for sample " + std::to_string(base + static_cast<int64_t>(n) - 1),
         "extra output: " + truncated(in), kProtocolFix);
  next_index_ = base + static_cast<int64_t>(n);
  return scores;
}

}  // namespace hpcrl::reward
