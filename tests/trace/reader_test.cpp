// Reading traces: what a crash leaves is read up to the last complete event
// (and the cut-off one counted), anything else that is not a trace is an
// InputError naming file:line:col.
#include <gtest/gtest.h>

#include "hpcrl/trace/reader.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;

namespace {

const std::string kTwoEvents =
    "[\n"
    "{\"name\":\"a\",\"cat\":\"span\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":10.5,\"dur\":2,\"args\":{\"step\":3}},\n"
    "{\"name\":\"all_reduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":4,"
    "\"args\":{\"group\":\"policy/dp[1]\",\"bytes\":4096}}";

std::string error_of(const std::string& text) {
  try {
    trace::parse_trace(text, "run/trace/rank-00001.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(TraceReader, ReadsClosedArrayWithFieldsAndArgs) {
  auto tf = trace::parse_trace(kTwoEvents + "\n]\n", "f.json");
  EXPECT_TRUE(tf.terminated);
  EXPECT_EQ(tf.skipped, 0);
  ASSERT_EQ(tf.events.size(), 2u);
  const auto& a = tf.events[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.cat, "span");
  EXPECT_EQ(a.ph, "X");
  EXPECT_EQ(a.pid, 1);
  EXPECT_DOUBLE_EQ(a.ts_us, 10.5);
  EXPECT_DOUBLE_EQ(a.dur_us, 2);
  ASSERT_EQ(a.args.size(), 1u);
  EXPECT_EQ(a.args[0].first, "step");
  EXPECT_EQ(tf.events[1].group, "policy/dp[1]");
  EXPECT_EQ(tf.events[1].args[0], (std::pair<std::string, double>{"bytes", 4096}));
  EXPECT_EQ(tf.valid_end, kTwoEvents.size());
}

TEST(TraceReader, UnterminatedArrayIsReadWhole) {
  auto tf = trace::parse_trace(kTwoEvents + ",\n", "f.json");
  EXPECT_FALSE(tf.terminated);
  EXPECT_EQ(tf.skipped, 0);
  EXPECT_EQ(tf.events.size(), 2u);
}

TEST(TraceReader, EventCutOffMidWriteIsSkippedAndCounted) {
  for (const char* tail : {"{\"name\":\"b\",\"ph\":\"X\",\"ts\":3", "{\"name\":\"b\",\"args\":{\"x\":1}", "{\"na",
                           "{\"name\":\"b}\",\"ph\":\"X"}) {
    auto tf = trace::parse_trace(kTwoEvents + ",\n" + tail, "f.json");
    EXPECT_EQ(tf.events.size(), 2u) << tail;
    EXPECT_EQ(tf.skipped, 1) << tail;
    EXPECT_FALSE(tf.terminated);
    EXPECT_EQ(tf.valid_end, kTwoEvents.size()) << tail;
  }
}

TEST(TraceReader, ObjectFormIsRead) {
  auto tf = trace::parse_trace("{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2}]}", "f.json");
  ASSERT_EQ(tf.events.size(), 1u);
  EXPECT_EQ(tf.events[0].name, "a");
}

TEST(TraceReader, MalformedTracesNameFileLineAndColumn) {
  EXPECT_EQ(error_of(""), "run/trace/rank-00001.json:1:1: empty trace file; regenerate the trace or move the file "
                          "out of the trace directory");
  EXPECT_EQ(error_of("hello"),
            "run/trace/rank-00001.json:1:1: not a Chrome trace (expected '[' to start the array of events); "
            "regenerate the trace or move the file out of the trace directory");
  EXPECT_NE(error_of(kTwoEvents + ",\nGARBAGE,\n").find("rank-00001.json:4:1: expected a trace event '{', found 'G'"),
            std::string::npos)
      << error_of(kTwoEvents + ",\nGARBAGE");
  EXPECT_NE(error_of("[\n{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":tru}\n]").find(
                "rank-00001.json:2:1: trace event is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of("[\n  {\"name\":\"a\",\"ph\":\"X\",\"ts\":1}\n]").find(
                "rank-00001.json:2:3: complete event (\"ph\":\"X\") without \"dur\""),
            std::string::npos)
      << error_of("[\n  {\"name\":\"a\",\"ph\":\"X\",\"ts\":1}\n]");
  EXPECT_NE(error_of("[{\"name\":\"a\",\"ph\":\"X\",\"ts\":\"1\",\"dur\":1}]").find("1:2: \"ts\" is not a number"),
            std::string::npos);
  const std::string no_comma = "[{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1} {\"ph\":\"M\"}]";
  EXPECT_NE(error_of(no_comma).find("1:39: missing ',' between trace events"), std::string::npos) << error_of(no_comma);
  EXPECT_NE(error_of("[]\nx").find("2:1: content after the closing ']'"), std::string::npos);
  EXPECT_NE(error_of("{\"other\": 1}").find("not a Chrome trace (expected a JSON array"), std::string::npos);
}

TEST(TraceReader, MissingFileIsAnInputErrorNamingIt) {
  try {
    trace::read_trace_file("/nonexistent/trace/rank-00000.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("trace file not found: /nonexistent/trace/rank-00000.json"),
              std::string::npos);
  }
}

// A crash can cut the file at any byte. Every prefix of a recorded trace must be
// readable, holding exactly the events that end inside the prefix and counting
// the one it cuts through (computed here from the file's lines).
TEST(TraceReader, EveryPrefixOfARecordedTraceIsReadable) {
  std::string path = trace_test::recorded_run("run2") + "/trace/rank-00001.json";
  std::string text = trace_test::read_text(path);
  std::vector<std::pair<size_t, size_t>> events;  // [start, end) of each event line's object
  for (size_t pos = text.find("\n{"); pos != std::string::npos; pos = text.find("\n{", pos + 1)) {
    size_t end = text.find('\n', pos + 1);
    size_t close = text.rfind('}', end);
    events.emplace_back(pos + 1, close + 1);
  }
  ASSERT_GT(events.size(), 30u);
  size_t closing_bracket = text.rfind(']');
  for (size_t cut = 1; cut <= text.size(); ++cut) {
    auto tf = trace::parse_trace(text.substr(0, cut), path);
    size_t complete = 0, open = 0;
    for (auto [start, end] : events) {
      complete += end <= cut;
      open += start < cut && cut < end;
    }
    ASSERT_EQ(tf.events.size(), complete) << "cut at byte " << cut;
    ASSERT_EQ(tf.skipped, static_cast<int64_t>(open)) << "cut at byte " << cut;
    ASSERT_EQ(tf.terminated, cut > closing_bracket) << "cut at byte " << cut;
  }
}
