// The `command` tool's channel to its program (protocol, outcomes and
// safeguards in hpcrl/tools/command_tool.h). One I/O thread per tool owns the
// program and its pipes: it (re)starts the program when a request waits, writes
// request lines, hands each reply line to the call waiting on its id, pumps
// stderr into a tail and notices the program's end. A caller queues its request,
// wakes the thread (self-pipe) and waits on a future for at most its timeout; a
// call given up on leaves the map, so a late reply finds no one and is dropped.
//
// Why these choices:
// - poll() on stdin/stdout/stderr and the self-pipe, 20 ms at a time: no pipe
//   blocks the thread (the program may read ahead, answer out of order), a new
//   request is written at once, a stop is seen promptly.
// - SIGPIPE is blocked in the I/O thread only: writing to a dead program is EPIPE.
// - Only the calls handed to a program fail when it ends; requests still queued
//   go to the restarted program.
// - Subprocess registers a child as it spawns it (reward/orphans.h), so one
//   tool's stop, which ends hpcrl's unregistered children, never kills a
//   program another thread is starting.
// - A reply line may be 6 × max_reply_bytes + 4 KiB (a content at the cap, JSON
//   escaped); more without a newline is a runaway print: the program is killed.
#include "hpcrl/tools/command_tool.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"
#include "reward/subprocess.h"
#include "tools/command_lines.h"

namespace hpcrl::tools {
namespace {

using reward::StderrTail;
using reward::Subprocess;
using namespace detail;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 20;
constexpr double kStopGraceS = 0.5;          // from stdin closed to SIGTERM
constexpr auto kLongestWait = std::chrono::hours(24 * 365 * 10);  // a longer timeout waits without limit

sigset_t just_sigpipe() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  return pipe;
}

}  // namespace

// Everything behind a CommandTool. The members under mu_ are shared with the
// callers; the I/O thread's own are touched by it alone (and the destructor, once it is joined).
struct CommandTool::Channel {
  struct Call {
    std::string line;   // the request line
    bool sent = false;  // handed to the running program (else it waits in queue_)
    std::promise<ToolResult> promise;
  };

  const CommandToolOptions& options_;
  const std::string command_;
  const size_t line_cap_;
  int wake_[2] = {-1, -1};  // the self-pipe: read end polled by the I/O thread

  mutable std::mutex mu_;             // guards the members down to thread_
  std::map<int64_t, Call> calls_;     // unanswered calls, by id
  std::deque<int64_t> queue_;         // calls not yet handed to a program
  int64_t next_id_ = 1;
  int starts_ = 0;                    // programs started
  pid_t pid_ = -1;                    // the running program's, -1 when none
  std::exception_ptr fatal_;          // set: every call throws it
  std::string last_end_, last_tail_;  // how the last program ended, its stderr tail
  bool stopping_ = false;
  std::thread thread_;

  std::unique_ptr<Subprocess> proc_;  // the I/O thread's own, down to the end
  std::unique_ptr<StderrTail> tail_;
  std::string out_;     // request bytes handed to the program
  size_t out_off_ = 0;  // of which written
  std::string in_;      // reply bytes not yet ending in '\n'

  explicit Channel(const CommandToolOptions& options)
      : options_(options), command_(command_line(options.argv)), line_cap_(line_cap(options.max_reply_bytes)) {
    HPCRL_CHECK(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2: " << std::strerror(errno));
  }

  ~Channel() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
    if (proc_) {  // a well-behaved program exits on EOF; the others get SIGTERM, then SIGKILL
      proc_->close_stdin();
      proc_->wait_exit(kStopGraceS);
      proc_->stop(0.0);
    }
    const ToolResult stopped{"tool " + options_.name + ": stopped before a reply", true};
    for (bool sent : {true, false}) settle_calls(sent, [&](auto& promise) { promise.set_value(stopped); });
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  // Queues one request (`fields`, which the id is put before); its future holds the result (or the
  // InputError of a program past max_restarts). Throws that InputError at once when it is already known.
  std::future<ToolResult> submit(const nlohmann::ordered_json& fields, int64_t& id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fatal_ && pid_ < 0 && starts_ > options_.max_restarts)
      fatal_ = std::make_exception_ptr(InputError(exhausted_message()));
    if (fatal_) std::rethrow_exception(fatal_);
    id = next_id_++;
    Call& call = calls_[id];
    nlohmann::ordered_json request = {{"id", id}};
    request.update(fields);
    call.line = dumped(request) + "\n";
    queue_.push_back(id);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    wake();
    return call.promise.get_future();
  }

  void wake() {
    const char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);  // EAGAIN: a wake-up is already pending
  }

  // Settles and forgets the calls handed to the program (`sent`) or the others (mu_ held).
  template <class Settle>
  void settle_calls(bool sent, Settle settle) {
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second.sent != sent) {
        ++it;
        continue;
      }
      settle(it->second.promise);
      it = calls_.erase(it);
    }
    if (!sent) queue_.clear();
  }

  // Why calls throw once the program ended more often than restarts allow (mu_ held).
  std::string exhausted_message() const {
    std::string tail;
    for (const auto& line : str::split(last_tail_, '\n')) tail += "\n    | " + line;
    return "tool " + options_.name + ": the program `" + command_ + "` ended " + std::to_string(starts_) +
           " times, more than max_restarts = " + std::to_string(options_.max_restarts) +
           " restarts allow; the last time it " + last_end_ + "\n  its stderr" +
           (tail.empty() ? std::string(": (nothing)") : " (last lines):" + tail) +
           "\n  fix: run the command by hand and paste a request line such as {\"id\": 1, \"trajectory\": \"t\", "
           "\"name\": \"" + options_.name + "\", \"arguments\": {}} into it: it must keep running and print one "
           "line {\"id\": 1, \"content\": \"<text>\"} (or \"error\") per request, flushing after each (Python: "
           "print(json.dumps(reply), flush=True)); logs belong on stderr";
  }

  // The I/O thread.
  void run() {
    const sigset_t pipe = just_sigpipe();
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);  // for the thread's whole life
    try {
      while (true) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_) return;
        }
        start_if_needed();
        queue_output();
        poll_once();
      }
    } catch (...) {  // an internal failure (pipes, waitpid): every call, now and later, reports it
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = std::current_exception();
      for (bool sent : {true, false}) settle_calls(sent, [&](auto& promise) { promise.set_exception(fatal_); });
    }
  }

  // Starts the program when none runs and a request waits, unless restarts ran out.
  void start_if_needed() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](int64_t id) { return !calls_.count(id); }),
                   queue_.end());
      if (proc_ || queue_.empty()) return;
      if (!fatal_ && starts_ > options_.max_restarts)
        fatal_ = std::make_exception_ptr(InputError(exhausted_message()));
      if (fatal_) return settle_calls(false, [&](auto& promise) { promise.set_exception(fatal_); });
    }
    std::unique_ptr<Subprocess> proc;
    try {
      proc = std::make_unique<Subprocess>(options_.argv, "tool " + options_.name);
    } catch (...) {  // it cannot be started (InputError): no call can succeed
      std::lock_guard<std::mutex> lock(mu_);
      fatal_ = std::current_exception();
      return settle_calls(false, [&](auto& promise) { promise.set_exception(fatal_); });
    }
    std::lock_guard<std::mutex> lock(mu_);
    spdlog::info("tool {}: started `{}` (pid {}{})", options_.name, command_, proc->pid(),
                 starts_ > 0 ? ", restart " + std::to_string(starts_) : std::string());
    ++starts_;
    pid_ = proc->pid();
    proc_ = std::move(proc);
    tail_ = std::make_unique<StderrTail>("tool " + options_.name + " stderr: ");
  }

  // Hands the queued requests to the program once what it was handed is written.
  void queue_output() {
    if (!proc_ || out_off_ < out_.size()) return;
    out_.clear();
    out_off_ = 0;
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : queue_) {
      auto it = calls_.find(id);
      if (it == calls_.end()) continue;  // given up on before it was sent
      it->second.sent = true;
      out_ += it->second.line;
    }
    queue_.clear();
  }

  void poll_once() {
    const bool writing = proc_ && out_off_ < out_.size();
    pollfd fds[4] = {{wake_[0], POLLIN, 0},
                     {proc_ ? proc_->stdout_fd() : -1, POLLIN, 0},
                     {proc_ ? proc_->stderr_fd() : -1, POLLIN, 0},
                     {writing ? proc_->stdin_fd() : -1, POLLOUT, 0}};
    if (::poll(fds, 4, kPollMs) <= 0) return;  // the timeout, or a signal
    char drain[64];
    if (fds[0].revents != 0)
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
    if (fds[2].revents != 0) reward::pump_stderr(*proc_, *tail_);
    if (fds[3].revents != 0 && !write_some()) return program_ended("closed its standard input");
    if (fds[1].revents != 0) {
      const bool open = read_some();
      take_lines();
      if (proc_ && !open) program_ended("closed its standard output");
    }
  }

  bool write_some() {  // false once the program closed its stdin
    while (out_off_ < out_.size()) {
      const ssize_t w = ::write(proc_->stdin_fd(), out_.data() + out_off_, out_.size() - out_off_);
      if (w > 0) {
        out_off_ += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      const sigset_t pipe = just_sigpipe();  // EPIPE: it closed its stdin, usually by exiting;
      const timespec zero{0, 0};             // take the SIGPIPE left pending on this thread
      sigtimedwait(&pipe, nullptr, &zero);
      proc_->close_stdin();
      return false;
    }
    return true;
  }

  bool read_some() {  // false once the program closed its stdout
    char buf[65536];
    while (proc_->stdout_fd() >= 0 && in_.size() <= line_cap_) {
      const ssize_t got = ::read(proc_->stdout_fd(), buf, sizeof buf);
      if (got > 0) {
        in_.append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      proc_->close_stdout();  // EOF, or an error that makes the pipe useless
    }
    return proc_->stdout_fd() >= 0;
  }

  // Takes each complete reply line; kills a program that runs on without a newline.
  void take_lines() {
    size_t start = 0;
    for (size_t nl = in_.find('\n'); proc_ && nl != std::string::npos; nl = in_.find('\n', start)) {
      const std::string line = in_.substr(start, nl - start);
      start = nl + 1;
      take_reply(line);
    }
    if (!proc_) return;  // killed for a bad line; in_ went with it
    in_.erase(0, start);
    if (in_.size() > line_cap_)
      kill_program("wrote more than " + std::to_string(line_cap_) + " bytes without a newline", in_);
  }

  void take_reply(const std::string& line) {
    if (line.size() > line_cap_)
      return kill_program("answered with a line of " + std::to_string(line.size()) + " bytes, over the cap of " +
                              std::to_string(line_cap_),
                          line);
    Reply reply = parse_reply(line, options_.name, options_.max_reply_bytes, options_.environment);
    if (!reply.problem.empty()) return kill_program("answered with a line that " + reply.problem, line);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(reply.id);
    if (it == calls_.end() || !it->second.sent)
      return spdlog::debug("tool {}: dropped a reply to id {}: no call waits for it (timed out, or never sent)",
                           options_.name, reply.id);
    it->second.promise.set_value(std::move(reply.result));
    calls_.erase(it);
  }

  void kill_program(const std::string& problem, const std::string& line) {
    drop_program(problem + ": " + shown(line) + "; it was stopped, the next call restarts it");
  }

  // The program closed a pipe: takes its last replies and stderr, and how it ended.
  void program_ended(const std::string& event) {
    if (proc_->stdout_fd() >= 0) {
      read_some();
      take_lines();
      if (!proc_) return;
    }
    const auto until = Clock::now() + std::chrono::seconds(1);  // bounded: a child it left may hold stderr
    while (proc_->stderr_fd() >= 0 && Clock::now() < until) {
      pollfd p{proc_->stderr_fd(), POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) reward::pump_stderr(*proc_, *tail_);
    }
    const auto status = proc_->wait_exit(kStopGraceS);
    drop_program(status ? *status : event + " while still running; it was stopped, the next call restarts it");
  }

  // Stops and reaps the program; the calls handed to it get an error result saying `how` it ended.
  void drop_program(const std::string& how) {
    proc_->stop(0.0);
    const std::string tail = tail_->text();
    const std::string message =
        "tool " + options_.name + ": the program " + how + " (stderr tail: " + tail_in_result(tail) + ")";
    spdlog::warn("tool {}: the program `{}` (pid {}) {}", options_.name, command_, proc_->pid(), how);
    std::lock_guard<std::mutex> lock(mu_);
    last_end_ = how;
    last_tail_ = tail;
    pid_ = -1;
    settle_calls(true, [&](auto& promise) { promise.set_value({message, true}); });
    proc_.reset();
    tail_.reset();
    out_.clear();
    out_off_ = 0;
    in_.clear();
  }
};

CommandTool::CommandTool(CommandToolOptions options) : options_(std::move(options)) {
  const std::string& n = options_.name;
  HPCRL_CHECK_INPUT(!n.empty(), "a command tool needs a name: the function name the model calls");
  HPCRL_CHECK_INPUT(!options_.argv.empty() && !options_.argv[0].empty(),
                    "tool " << n << ": empty command; give the program, e.g. `python3 tool.py`");
  HPCRL_CHECK_INPUT(options_.max_reply_bytes > 0, "tool " << n << ": max_reply_bytes is 0; give e.g. 65536");
  HPCRL_CHECK_INPUT(options_.max_restarts >= 0, "tool " << n << ": max_restarts < 0; give 0 or more");
  HPCRL_CHECK_INPUT(options_.parameters.is_object(), "tool " << n << ": parameters must be a JSON schema object, "
                                                             << "e.g. {\"type\": \"object\", \"properties\": {}}");
  channel_ = std::make_unique<Channel>(options_);
}

CommandTool::~CommandTool() = default;  // ~Channel stops the thread, then the program

nlohmann::ordered_json CommandTool::schema() const {
  nlohmann::ordered_json function = {
      {"name", options_.name}, {"description", options_.description}, {"parameters", options_.parameters}};
  return {{"type", "function"}, {"function", std::move(function)}};
}

ToolResult CommandTool::exchange(const nlohmann::ordered_json& fields, std::chrono::milliseconds timeout) {
  int64_t id = 0;
  std::future<ToolResult> result = channel_->submit(fields, id);
  const auto wait = std::min<std::chrono::milliseconds>(timeout, kLongestWait);
  if (result.wait_for(wait) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(channel_->mu_);
    if (channel_->calls_.erase(id) > 0)  // a late reply now finds no one
      return {"tool " + options_.name + ": no reply within " + seconds_text(timeout) + " s", true};
  }
  return result.get();  // answered (or failed) by now
}

ToolResult CommandTool::call(const nlohmann::json& arguments, const CallContext& context) {
  using Fields = nlohmann::ordered_json;
  if (!options_.environment)
    return exchange(Fields{{"trajectory", context.trajectory}, {"name", options_.name}, {"arguments", arguments}},
                    context.timeout);
  const auto t0 = Clock::now();
  if (context.reset) {
    const ToolResult reset = exchange(Fields{{"type", "reset"}, {"trajectory", context.trajectory},
                                             {"name", options_.name}, {"prompt", context.reset->prompt},
                                             {"answer", context.reset->answer}},
                                      context.timeout);
    if (reset.error) return reset;
  }
  const auto left = context.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  return exchange(Fields{{"type", "step"}, {"trajectory", context.trajectory}, {"name", options_.name},
                         {"action", arguments}},
                  std::max(left, std::chrono::milliseconds(1)));
}

std::optional<pid_t> CommandTool::pid() const {
  std::lock_guard<std::mutex> lock(channel_->mu_);
  return channel_->pid_ > 0 ? std::optional<pid_t>(channel_->pid_) : std::nullopt;
}

int CommandTool::restarts() const {
  std::lock_guard<std::mutex> lock(channel_->mu_);
  return std::max(0, channel_->starts_ - 1);
}

}  // namespace hpcrl::tools
