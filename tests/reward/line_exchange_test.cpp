// The line exchange on its own, with a protocol that is not the `command`
// reward's: `cat` as the program answers each request line with itself, so the
// lines the protocol receives show the transport's order, and a program that
// exits early shows how a broken exchange is reported.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "reward/line_exchange.h"
#include "reward/subprocess.h"

using namespace hpcrl::reward;

namespace {

// Sends the given lines and records every answer and the fault, if any.
struct RecordingProtocol : LineExchange::Protocol {
  std::vector<std::string> lines;
  std::vector<std::string> answers;
  std::vector<size_t> answered_requests;
  std::vector<ExchangeFault> faults;

  std::string request(size_t k) override { return lines[k] + "\n"; }
  void answer(size_t k, const std::string& line) override {
    answered_requests.push_back(k);
    answers.push_back(line);
  }
  void broken(const ExchangeFault& fault) override {
    faults.push_back(fault);
    throw std::runtime_error("broken exchange");
  }
};

void exchange_all(Subprocess& proc, RecordingProtocol& protocol) {
  StderrTail tail("test stderr: ");
  LineExchange exchange(proc, tail, protocol, protocol.lines.size(), std::chrono::seconds(10));
  while (!exchange.all_answered()) exchange.step();
  exchange.expect_no_more_output();
}

TEST(LineExchange, EachAnswerLineGoesToTheProtocolForItsRequestInOrder) {
  Subprocess cat({"cat"}, "test");
  RecordingProtocol protocol;
  protocol.lines = {"first", "second request", "3"};
  exchange_all(cat, protocol);
  // cat echoes each request line: answer k is request k without its newline.
  EXPECT_EQ(protocol.answers, (std::vector<std::string>{"first", "second request", "3"}));
  EXPECT_EQ(protocol.answered_requests, (std::vector<size_t>{0, 1, 2}));
}

TEST(LineExchange, AProgramThatExitsUnansweredIsReportedAsClosedStdoutAtItsRequest) {
  Subprocess quits({"sh", "-c", "read line; exit 0"}, "test");
  RecordingProtocol protocol;
  protocol.lines = {"only"};
  EXPECT_THROW(exchange_all(quits, protocol), std::runtime_error);
  ASSERT_EQ(protocol.faults.size(), 1u);
  EXPECT_EQ(protocol.faults[0].kind, ExchangeFault::Kind::kClosedStdout);
  EXPECT_EQ(protocol.faults[0].request, 0u);  // the first (only) request was never answered
  EXPECT_EQ(protocol.faults[0].answered, 0u);
  EXPECT_EQ(protocol.faults[0].batch, 1u);
}

}  // namespace
