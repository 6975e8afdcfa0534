// The trace writer: the file is a Chrome JSON array with rank/lane metadata,
// spans nest, events are flushed at the promised points (so a killed process
// keeps them), threads can record concurrently, and a disabled trace writes
// nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

nlohmann::json parse_strict(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

const nlohmann::json* find_event(const nlohmann::json& events, const std::string& name, const std::string& ph = "X") {
  for (const auto& e : events)
    if (e["name"] == name && e["ph"] == ph) return &e;
  return nullptr;
}

std::string thread_name(const nlohmann::json& events, int tid) {
  for (const auto& e : events)
    if (e["name"] == "thread_name" && e["tid"] == tid) return e["args"]["name"];
  return "";
}

// Events of the file as the reader sees them right now (tracing still running).
std::vector<std::string> names_in_file(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& e : trace::parse_trace(read_text(path), path).events)
    if (e.ph == "X") names.push_back(e.name);
  return names;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void busy_us(double us) {
  double t0 = trace::now_us();
  while (trace::now_us() - t0 < us) {
  }
}

}  // namespace

TEST(TraceWriter, WritesChromeArrayWithRankLanesNestingAndArgs) {
  TempDir dir("writer");
  trace::start(dir.str(), 3);
  ASSERT_TRUE(trace::enabled());
  EXPECT_EQ(trace::file_path(), dir.str() + "/rank-00003.json");
  {
    trace::ScopedSpan outer("grpo/actor_update", {{"step", 7}});
    busy_us(200);
    {
      trace::ScopedSpan inner(std::string("grpo/actor_update/backward"));
      inner.add_arg("tokens", 4096);
      busy_us(300);
    }
    { trace::ScopedSpan mb("grpo/actor_update/pp_forward", {{"micro_batch", 1}}, trace::pipeline_lane(2)); }
    trace::comm("all_reduce", "policy/dp[0]", 1 << 20, trace::now_us(), 12.5);
  }
  trace::stop();
  EXPECT_FALSE(trace::enabled());

  nlohmann::json events = parse_strict(dir.str() + "/rank-00003.json");  // closed array: strict JSON
  ASSERT_TRUE(events.is_array());
  const auto* process = find_event(events, "process_name", "M");
  ASSERT_NE(process, nullptr);
  EXPECT_EQ((*process)["pid"], 3);
  EXPECT_EQ((*process)["args"]["name"], "rank 3");
  EXPECT_EQ(thread_name(events, trace::kMainLane), "main");
  EXPECT_EQ(thread_name(events, trace::kCommLane), "comm");
  EXPECT_EQ(thread_name(events, trace::pipeline_lane(2)), "pp stage 2");

  const auto* outer = find_event(events, "grpo/actor_update");
  const auto* inner = find_event(events, "grpo/actor_update/backward");
  const auto* mb = find_event(events, "grpo/actor_update/pp_forward");
  const auto* ar = find_event(events, "all_reduce");
  ASSERT_TRUE(outer && inner && mb && ar);
  EXPECT_EQ((*outer)["pid"], 3);
  EXPECT_EQ((*outer)["tid"], trace::kMainLane);
  EXPECT_EQ((*outer)["args"]["step"], 7);
  EXPECT_EQ((*inner)["args"]["tokens"], 4096);
  EXPECT_GE((*inner)["dur"].get<double>(), 300.0);
  EXPECT_GE((*outer)["dur"].get<double>(), 500.0);
  double o0 = (*outer)["ts"], o1 = o0 + (*outer)["dur"].get<double>();
  double i0 = (*inner)["ts"], i1 = i0 + (*inner)["dur"].get<double>();
  EXPECT_LE(o0, i0);
  EXPECT_LE(i1, o1);
  EXPECT_EQ((*mb)["tid"], trace::pipeline_lane(2));
  EXPECT_EQ((*mb)["args"]["micro_batch"], 1);
  EXPECT_EQ((*ar)["cat"], "comm");
  EXPECT_EQ((*ar)["tid"], trace::kCommLane);
  EXPECT_EQ((*ar)["args"]["group"], "policy/dp[0]");
  EXPECT_EQ((*ar)["args"]["bytes"], 1 << 20);
  EXPECT_DOUBLE_EQ((*ar)["dur"].get<double>(), 12.5);

  // ts is Unix-epoch microseconds, so ranks on different nodes line up.
  double unix_now_us = std::chrono::duration<double, std::micro>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(o0, unix_now_us, 60e6);
}

TEST(TraceWriter, DisabledTraceWritesNothing) {
  TempDir dir("disabled");
  EXPECT_FALSE(trace::enabled());
  { trace::ScopedSpan s("sft/step"); }
  trace::complete("x", 0, 1);
  trace::comm("all_reduce", "g", 8, 0, 1);
  trace::Options off;
  off.chrome = false;
  trace::start(dir.str(), 0, off);
  EXPECT_FALSE(trace::enabled());
  EXPECT_FALSE(trace::comm_enabled());
  { trace::ScopedSpan s("sft/step"); }
  trace::stop();
  EXPECT_TRUE(stdfs::is_empty(dir.path));
}

TEST(TraceWriter, CommOffKeepsSpansButDropsCommunicatorCalls) {
  TempDir dir("commoff");
  trace::Options options;
  options.comm = false;
  trace::start(dir.str(), 0, options);
  EXPECT_TRUE(trace::enabled());
  EXPECT_FALSE(trace::comm_enabled());
  { trace::ScopedSpan s("sft/step"); }
  trace::comm("all_reduce", "g", 8, trace::now_us(), 1);
  trace::stop();
  auto events = parse_strict(dir.str() + "/rank-00000.json");
  EXPECT_NE(find_event(events, "sft/step"), nullptr);
  EXPECT_EQ(find_event(events, "all_reduce"), nullptr);
}

TEST(TraceWriter, TopLevelSpanEndFlushesNestedEndDoesNot) {
  TempDir dir("toplevel");
  trace::Options options;
  options.flush_events = 1000;
  options.flush_interval_s = 3600;
  trace::start(dir.str(), 0, options);
  std::string path = trace::file_path();
  {
    trace::ScopedSpan outer("sft");
    { trace::ScopedSpan inner("sft/step"); }
    EXPECT_FALSE(contains(names_in_file(path), "sft/step")) << "a nested span end must not write";
  }
  auto names = names_in_file(path);
  EXPECT_TRUE(contains(names, "sft/step"));
  EXPECT_TRUE(contains(names, "sft"));
  trace::stop();
}

TEST(TraceWriter, FlushesEveryNEvents) {
  TempDir dir("every_n");
  trace::Options options;
  options.flush_events = 5;
  options.flush_interval_s = 3600;
  trace::start(dir.str(), 0, options);
  std::string path = trace::file_path();
  for (int i = 0; i < 4; ++i) trace::complete("e" + std::to_string(i), trace::now_us(), 1);
  EXPECT_TRUE(names_in_file(path).empty());
  trace::complete("e4", trace::now_us(), 1);
  EXPECT_EQ(names_in_file(path).size(), 5u);
  trace::complete("e5", trace::now_us(), 1);
  trace::flush();
  EXPECT_EQ(names_in_file(path).size(), 6u);
  trace::stop();
}

TEST(TraceWriter, ConcurrentThreadsRecordEveryEvent) {
  TempDir dir("threads");
  trace::Options options;
  options.flush_events = 7;  // many writes interleaved with recording
  trace::start(dir.str(), 1, options);
  const int kThreads = 4, kSpans = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kSpans; ++i) {
        trace::ScopedSpan s("thread/" + std::to_string(t), {{"i", i}});
        trace::comm("all_reduce", "world", i, trace::now_us(), 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  trace::stop();
  auto events = parse_strict(dir.str() + "/rank-00001.json");
  std::map<std::string, int> counts;
  for (const auto& e : events)
    if (e["ph"] == "X") counts[e["name"]]++;
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(counts["thread/" + std::to_string(t)], kSpans);
  EXPECT_EQ(counts["all_reduce"], kThreads * kSpans);
}

TEST(TraceWriter, KilledProcessKeepsFlushedEventsAsReadablePrefix) {
  TempDir dir("killed");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    trace::Options options;
    options.flush_interval_s = 3600;
    trace::start(dir.str(), 0, options);
    { trace::ScopedSpan stage("sft"); { trace::ScopedSpan step("sft/step"); } }
    trace::ScopedSpan unfinished("grpo");
    { trace::ScopedSpan buffered("grpo/rollout"); }
    ::kill(::getpid(), SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::string path = dir.str() + "/rank-00000.json";
  std::string text = read_text(path);
  EXPECT_THROW({ auto j = nlohmann::json::parse(text); }, nlohmann::json::parse_error) << "an unterminated array";
  auto tf = trace::parse_trace(text, path);
  EXPECT_FALSE(tf.terminated);
  EXPECT_EQ(tf.skipped, 0);
  std::vector<std::string> names;
  for (const auto& e : tf.events)
    if (e.ph == "X") names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"sft/step", "sft"}));
}

TEST(TraceWriter, AppendContinuesAfterCleanStopAndAfterCutOffEvent) {
  TempDir dir("append");
  trace::start(dir.str(), 0);
  { trace::ScopedSpan s("first"); }
  trace::stop();
  std::string path = dir.str() + "/rank-00000.json";
  std::string text = read_text(path);
  write_text(path, text.substr(0, text.size() - 3) + ",\n{\"name\":\"cut\",\"ph\":\"X\",\"ts\":1");  // crash mid-event
  trace::Options options;
  options.append = true;
  trace::start(dir.str(), 0, options);
  { trace::ScopedSpan s("second"); }
  trace::stop();
  auto events = parse_strict(path);  // still one valid array
  EXPECT_NE(find_event(events, "first"), nullptr);
  EXPECT_NE(find_event(events, "second"), nullptr);
  EXPECT_EQ(find_event(events, "cut"), nullptr);
}

TEST(TraceWriter, SecondStartSameTargetIsNoOpOtherTargetIsAnError) {
  TempDir dir("restart");
  trace::start(dir.str(), 0);
  EXPECT_NO_THROW(trace::start(dir.str(), 0));
  try {
    trace::start(dir.str() + "/other", 1);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("call trace::stop() before tracing into"), std::string::npos) << e.what();
  }
  trace::stop();
}

TEST(TraceWriter, EscapesNamesAndRenamesLanes) {
  TempDir dir("escape");
  trace::start(dir.str(), 0);
  trace::name_lane(3, "rollout \"engine\"");
  trace::complete("odd \"name\"\\with\ttab", trace::now_us(), 1, 3);
  trace::stop();
  auto events = parse_strict(dir.str() + "/rank-00000.json");
  EXPECT_NE(find_event(events, "odd \"name\"\\with\ttab"), nullptr);
  EXPECT_EQ(thread_name(events, 3), "rollout \"engine\"");
}

TEST(TraceWriter, ForkedChildDoesNotWriteIntoTheParentsTrace) {
  TempDir dir("fork");
  trace::Options options;
  options.flush_interval_s = 3600;
  trace::start(dir.str(), 0, options);
  { trace::ScopedSpan outer("parent"); { trace::ScopedSpan buffered("parent/buffered_at_fork"); }
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      { trace::ScopedSpan s("child"); }
      std::exit(trace::enabled() ? 3 : 0);  // runs atexit handlers, as a finished child process does
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "tracing stayed on in the child";
  }
  trace::stop();
  auto events = parse_strict(dir.str() + "/rank-00000.json");  // one valid array: no stray ']'
  int buffered = 0;
  for (const auto& e : events) buffered += e["name"] == "parent/buffered_at_fork";
  EXPECT_EQ(buffered, 1) << "the buffer was written twice";
  EXPECT_EQ(find_event(events, "child"), nullptr);
}

TEST(TimedSpan, MeasuresWithTracingOffTooAndItsEventSpansTheMetric) {
  // Off: no event, but the metric still gets its seconds.
  {
    trace::TimedSpan off("sft/step");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(off.elapsed_seconds(), 0.020);
  }
  // On: the event opens at the span's one clock reading, so it lasts at least
  // what the metric read inside it (20 ms of sleep in both).
  TempDir dir("timed");
  trace::start(dir.str(), 0);
  const std::string path = trace::file_path();
  double seconds = 0;
  {
    trace::TimedSpan on("sft/step", {{"step", 3}});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seconds = on.elapsed_seconds();
  }
  trace::stop();
  EXPECT_GE(seconds, 0.020);
  const trace::Event* step = nullptr;
  auto events = trace::parse_trace(read_text(path), path).events;
  for (const auto& e : events)
    if (e.name == "sft/step") step = &e;
  ASSERT_NE(step, nullptr);
  EXPECT_GE(step->dur_us, seconds * 1e6);
}
