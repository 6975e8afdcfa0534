// One batch of a line-per-request exchange with a long-lived child program:
// request lines go to its stdin while answer lines are read from its stdout,
// both through poll(), so neither side can block on a full pipe and the
// program may read ahead (several requests in flight). Its stderr is pumped
// into a StderrTail meanwhile. The transport knows lines, order, the
// per-answer deadline and how the program can break the exchange; what a
// request says, what an answer means and how a broken exchange is reported
// belong to the Protocol (the `command` reward's is in command_reward.cpp).
//
//   LineExchange exchange(proc, tail, protocol, n, timeout);
//   while (!exchange.all_answered()) exchange.step();
//   exchange.expect_no_more_output();
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace hpcrl::reward {

class Subprocess;
class StderrTail;

// How the program broke the exchange. `request` is the 0-based request of the
// batch the fault concerns (the oldest unanswered one; for kExtraOutput the last one).
struct ExchangeFault {
  enum class Kind {
    kLineBeforeRequest,  // an answer line arrived before its request was begun
    kExtraOutput,        // output after the batch's last answer
    kRunawayLine,        // more than kMaxAnswerBytes without a newline
    kTimeout,            // no answer within the timeout
    kClosedStdout,       // the program closed its stdout (usually: it exited)
    kClosedStdin,        // the program closed its stdin with answers outstanding
  };
  Kind kind;
  size_t request = 0;
  std::string text;   // the line / extra output / unterminated bytes at fault ("" for the others)
  size_t answered = 0;  // answers read in this batch
  size_t batch = 0;     // requests in this batch
};

class LineExchange {
 public:
  using Clock = std::chrono::steady_clock;

  // The side that owns the meaning of the lines.
  class Protocol {
   public:
    virtual ~Protocol() = default;
    // Request k of the batch, one line ending in '\n'.
    virtual std::string request(size_t k) = 0;
    // The answer line (without '\n') to request k; throws when it is not a valid answer.
    virtual void answer(size_t k, const std::string& line) = 0;
    // Reports a broken exchange; must throw.
    virtual void broken(const ExchangeFault& fault) = 0;
  };

  // One answer line; longer is a runaway print.
  static constexpr size_t kMaxAnswerBytes = size_t{1} << 20;

  // `batch` requests, each answer due within `timeout` of the previous one (or of now).
  LineExchange(Subprocess& proc, StderrTail& tail, Protocol& protocol, size_t batch, Clock::duration timeout);

  bool all_answered() const { return answered_ >= batch_; }
  // One round: queue the next request, check the deadline, wait for the pipes,
  // then write, read and take answers as they allow; checks the program is still there.
  void step();
  // After the last answer: a partial line left would become the next batch's first answer.
  void expect_no_more_output();

 private:
  void queue_next_request();
  void check_deadline(Clock::time_point now);
  struct Ready {
    bool any = false;  // poll reported something (not a signal, not the timeout)
    bool stdout_ = false, stderr_ = false, stdin_ = false;
  };
  Ready wait_for_pipes(Clock::time_point now);
  void write_some();
  bool read_available();  // false once the program closed its stdout
  void take_answers();
  void check_program_there(bool stdout_open);
  [[noreturn]] void fail(ExchangeFault::Kind kind, size_t request, std::string text = "");

  Subprocess& proc_;
  StderrTail& tail_;
  Protocol& protocol_;
  const size_t batch_;
  const Clock::duration timeout_;
  Clock::time_point deadline_;  // for the oldest unanswered request
  std::string out_;             // the request line being written
  size_t out_off_ = 0;          // bytes of out_ already written
  std::string in_;              // answer bytes not yet ending in '\n'
  size_t queued_ = 0;           // request lines begun
  size_t written_ = 0;          // request lines completely written
  size_t answered_ = 0;         // answers taken
  bool input_closed_ = false;   // the program closed its stdin (EPIPE)
};

}  // namespace hpcrl::reward
