// The transport of a line-per-request exchange with a child program (see line_exchange.h).
#include "reward/line_exchange.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "hpcrl/util/check.h"
#include "reward/subprocess.h"

namespace hpcrl::reward {

LineExchange::LineExchange(Subprocess& proc, StderrTail& tail, Protocol& protocol, size_t batch,
                           Clock::duration timeout)
    : proc_(proc), tail_(tail), protocol_(protocol), batch_(batch), timeout_(timeout),
      deadline_(Clock::now() + timeout) {}

void LineExchange::step() {
  queue_next_request();
  const auto now = Clock::now();
  check_deadline(now);
  const Ready ready = wait_for_pipes(now);
  if (!ready.any) return;
  if (ready.stderr_) pump_stderr(proc_, tail_);
  if (ready.stdin_) write_some();
  bool stdout_open = true;
  if (ready.stdout_ || input_closed_) {
    stdout_open = read_available();
    take_answers();
  }
  check_program_there(stdout_open);
}

void LineExchange::expect_no_more_output() {
  if (!in_.empty()) fail(ExchangeFault::Kind::kExtraOutput, batch_ - 1, in_);
}

void LineExchange::queue_next_request() {
  if (out_off_ == out_.size() && queued_ < batch_ && !input_closed_) {
    out_ = protocol_.request(queued_++);
    out_off_ = 0;
  }
}

void LineExchange::check_deadline(Clock::time_point now) {
  if (now >= deadline_) fail(ExchangeFault::Kind::kTimeout, answered_);
}

// Waits until a pipe is ready or the deadline passes; nothing is ready after a signal or the timeout.
LineExchange::Ready LineExchange::wait_for_pipes(Clock::time_point now) {
  const bool want_write = !input_closed_ && out_off_ < out_.size();
  pollfd fds[3] = {{proc_.stdout_fd(), POLLIN, 0},
                   {proc_.stderr_fd(), POLLIN, 0},
                   {want_write ? proc_.stdin_fd() : -1, POLLOUT, 0}};
  const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count() + 1;
  int r = ::poll(fds, 3, static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)));
  if (r < 0 && errno == EINTR) return {};
  HPCRL_CHECK(r >= 0, "poll: " << std::strerror(errno));
  if (r == 0) return {};
  return {true, fds[0].revents != 0, fds[1].revents != 0, fds[2].revents != 0};
}

void LineExchange::write_some() {
  ssize_t w = ::write(proc_.stdin_fd(), out_.data() + out_off_, out_.size() - out_off_);
  if (w > 0) {
    out_off_ += static_cast<size_t>(w);
    if (out_off_ == out_.size()) ++written_;
  } else if (w < 0 && errno == EPIPE) {
    // Usually it exited: keep reading, so answers already in the pipe count and the
    // message names the request it really stopped at.
    proc_.close_stdin();
    input_closed_ = true;
  } else {
    HPCRL_CHECK(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR),
                "write to the reward program: " << std::strerror(errno));
  }
}

bool LineExchange::read_available() {
  char buf[65536];
  while (true) {
    ssize_t got = ::read(proc_.stdout_fd(), buf, sizeof buf);
    if (got > 0) {
      in_.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // 0 bytes or an error: closed
  }
}

// Hands each complete line to the protocol as the answer to the oldest unanswered request.
void LineExchange::take_answers() {
  size_t start = 0;
  for (size_t nl = in_.find('\n'); nl != std::string::npos; nl = in_.find('\n', start)) {
    std::string line = in_.substr(start, nl - start);
    start = nl + 1;
    if (answered_ >= queued_) fail(ExchangeFault::Kind::kLineBeforeRequest, answered_, line);
    protocol_.answer(answered_, line);
    ++answered_;
    deadline_ = Clock::now() + timeout_;
    if (answered_ == batch_ && nl + 1 < in_.size())
      fail(ExchangeFault::Kind::kExtraOutput, batch_ - 1, in_.substr(nl + 1));
  }
  in_.erase(0, start);
  if (in_.size() > kMaxAnswerBytes) fail(ExchangeFault::Kind::kRunawayLine, answered_, in_);
}

void LineExchange::check_program_there(bool stdout_open) {
  if (!stdout_open && answered_ < batch_) fail(ExchangeFault::Kind::kClosedStdout, answered_);
  if (input_closed_ && answered_ >= written_ && answered_ < batch_)
    fail(ExchangeFault::Kind::kClosedStdin, answered_);
}

void LineExchange::fail(ExchangeFault::Kind kind, size_t request, std::string text) {
  protocol_.broken(ExchangeFault{kind, request, std::move(text), answered_, batch_});
  HPCRL_CHECK(false, "LineExchange::Protocol::broken returned; it must throw");
}

}  // namespace hpcrl::reward
