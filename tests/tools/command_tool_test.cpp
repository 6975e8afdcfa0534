// The `command` tool against a real child process (tool_helper, built beside
// this test): answers matched by id across threads and out of order, state per
// trajectory, the timeout, every way the program can fail (crash, garbage,
// flood, an error reply, an oversized reply) as an error result, restarts and
// their limit (InputError), and no process left behind.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hpcrl/tools/command_tool.h"
#include "tools/command_lines.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::tools;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

CommandToolOptions helper(const std::string& name, const std::vector<std::string>& args) {
  CommandToolOptions o;
  o.name = name;
  o.argv = {HPCRL_TOOL_HELPER};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.description = "a test tool";
  return o;
}

CallContext in(const std::string& trajectory, std::chrono::milliseconds timeout = 10s) {
  return CallContext{trajectory, timeout};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST(CommandTool, AddGivesFiveForTwoPlusThree) {
  CommandTool tool(helper("add", {"add"}));
  const ToolResult r = tool.call(Json{{"a", 2}, {"b", 3}}, in("t0"));
  EXPECT_FALSE(r.error) << r.text;
  EXPECT_EQ(r.text, "5");
}

TEST(CommandTool, ConstructingStartsNoProgramAndSchemaIsAFunction) {
  CommandTool tool(helper("add", {"add"}));
  EXPECT_FALSE(tool.pid().has_value());
  const auto schema = tool.schema();
  EXPECT_EQ(schema.dump(), R"({"type":"function","function":{"name":"add","description":"a test tool",)"
                           R"("parameters":{"type":"object","properties":{}}}})");
}

TEST(CommandTool, SixteenConcurrentCallsFromFourThreadsGetTheirOwnAnswers) {
  CommandTool tool(helper("add", {"add"}));
  std::vector<std::vector<ToolResult>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i)
        results[t].push_back(tool.call(Json{{"a", 100 * t}, {"b", i}}, in("traj-" + std::to_string(t))));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(results[t].size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_FALSE(results[t][i].error) << results[t][i].text;
      EXPECT_EQ(results[t][i].text, std::to_string(100 * t + i));
    }
  }
}

TEST(CommandTool, RepliesInReverseOrderAreMatchedById) {
  CommandTool tool(helper("rev", {"reverse-order"}));
  ToolResult first, second;
  std::thread a([&] { first = tool.call(Json{{"x", 1}}, in("a")); });
  std::thread b([&] { second = tool.call(Json{{"x", 2}}, in("b")); });
  a.join();
  b.join();
  EXPECT_FALSE(first.error) << first.text;
  EXPECT_FALSE(second.error) << second.text;
  EXPECT_EQ(first.text, R"({"x":1})");
  EXPECT_EQ(second.text, R"({"x":2})");
}

TEST(CommandTool, StateIsKeptPerTrajectory) {
  CommandTool tool(helper("counter", {"state"}));
  EXPECT_EQ(tool.call(Json::object(), in("t1")).text, "1");
  EXPECT_EQ(tool.call(Json::object(), in("t1")).text, "2");
  EXPECT_EQ(tool.call(Json::object(), in("t2")).text, "1");
  EXPECT_EQ(tool.call(Json::object(), in("t1")).text, "3");
  EXPECT_EQ(tool.call(Json::object(), in("t2")).text, "2");
}

TEST(CommandTool, ReplyAfterHundredMillisecondsWithinOneSecondSucceeds) {
  CommandTool tool(helper("slow", {"sleep", "100"}));
  const ToolResult r = tool.call(Json{{"q", "hi"}}, in("t0", 1000ms));
  EXPECT_FALSE(r.error) << r.text;
  EXPECT_EQ(r.text, R"({"q":"hi"})");
}

TEST(CommandTool, NoReplyWithinTheTimeoutIsAnErrorResult) {
  CommandTool tool(helper("stuck", {"hang"}));
  const auto start = Clock::now();
  const ToolResult r = tool.call(Json::object(), in("t0", 200ms));
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_TRUE(r.error);
  EXPECT_TRUE(contains(r.text, "tool stuck: no reply within 0.2 s")) << r.text;
}

TEST(CommandTool, LateReplyToATimedOutCallIsDropped) {
  CommandTool tool(helper("slow", {"sleep", "300"}));
  const ToolResult late = tool.call(Json{{"n", 1}}, in("t0", 100ms));
  EXPECT_TRUE(late.error) << late.text;
  const ToolResult next = tool.call(Json{{"n", 2}}, in("t0", 5000ms));
  EXPECT_FALSE(next.error) << next.text;
  EXPECT_EQ(next.text, R"({"n":2})");
}

TEST(CommandTool, CrashIsAnErrorResultAndTheNextCallRestartsTheProgram) {
  const std::string marker = testing::TempDir() + "command_tool_crash_once_" + std::to_string(::getpid());
  std::remove(marker.c_str());
  CommandTool tool(helper("flaky", {"crash-once", marker}));
  const ToolResult crashed = tool.call(Json{{"a", 2}, {"b", 3}}, in("t0"));
  EXPECT_TRUE(crashed.error);
  EXPECT_TRUE(contains(crashed.text, "tool flaky: the program exited with status 3")) << crashed.text;
  EXPECT_TRUE(contains(crashed.text, "boom")) << crashed.text;
  const ToolResult again = tool.call(Json{{"a", 2}, {"b", 3}}, in("t0"));
  EXPECT_FALSE(again.error) << again.text;
  EXPECT_EQ(again.text, "5");
  EXPECT_EQ(tool.restarts(), 1);
  std::remove(marker.c_str());
}

TEST(CommandTool, LineThatIsNotJsonIsAnErrorResultNamingTheLine) {
  CommandTool tool(helper("junk", {"garbage"}));
  const ToolResult r = tool.call(Json::object(), in("t0"));
  EXPECT_TRUE(r.error);
  EXPECT_TRUE(contains(r.text, "tool junk:")) << r.text;
  EXPECT_TRUE(contains(r.text, "is not JSON: not json")) << r.text;
  EXPECT_FALSE(tool.pid().has_value());  // killed; the next call restarts it
}

TEST(CommandTool, FloodWithoutNewlineIsAnErrorResultWithoutHanging) {
  CommandTool tool(helper("flood", {"flood"}));
  const auto start = Clock::now();
  const ToolResult r = tool.call(Json::object(), in("t0"));
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_TRUE(r.error);
  EXPECT_TRUE(contains(r.text, "bytes without a newline")) << r.text.substr(0, 500);
  EXPECT_LT(r.text.size(), 2000u);
}

TEST(CommandTool, ErrorReplyIsAnErrorResult) {
  CommandTool tool(helper("picky", {"error"}));
  const ToolResult r = tool.call(Json::object(), in("t0"));
  EXPECT_TRUE(r.error);
  EXPECT_EQ(r.text, "tool picky: bad input");
  EXPECT_TRUE(tool.pid().has_value());  // an error reply is an answer: the program keeps running
}

TEST(CommandTool, ContentOverMaxReplyBytesIsAnErrorResult) {
  CommandToolOptions o = helper("echo", {"echo"});
  o.max_reply_bytes = 16;
  CommandTool tool(o);
  const ToolResult big = tool.call(Json{{"s", "a text of more than sixteen bytes"}}, in("t0"));
  EXPECT_TRUE(big.error);
  EXPECT_TRUE(contains(big.text, "over max_reply_bytes = 16")) << big.text;
  const ToolResult small = tool.call(Json{{"s", "ok"}}, in("t0"));
  EXPECT_FALSE(small.error) << small.text;
  EXPECT_EQ(small.text, R"({"s":"ok"})");
  EXPECT_EQ(tool.restarts(), 0);
}

TEST(CommandTool, MoreThanMaxRestartsThrowsInputErrorNamingTheTool) {
  CommandToolOptions o = helper("crasher", {"crash"});
  o.max_restarts = 1;
  CommandTool tool(o);
  EXPECT_TRUE(tool.call(Json::object(), in("t0")).error);  // first start
  EXPECT_TRUE(tool.call(Json::object(), in("t0")).error);  // restart 1
  std::string message;
  try {
    tool.call(Json::object(), in("t0"));
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, "tool crasher: the program")) << message;
  EXPECT_TRUE(contains(message, HPCRL_TOOL_HELPER)) << message;
  EXPECT_TRUE(contains(message, "exited with status 3")) << message;
  EXPECT_TRUE(contains(message, "boom")) << message;
  EXPECT_THROW(tool.call(Json::object(), in("t0")), InputError);  // and stays so
}

TEST(CommandTool, ProgramThatCannotStartThrowsInputError) {
  CommandToolOptions o = helper("missing", {});
  o.argv = {"/nonexistent/hpcrl-tool"};
  CommandTool missing(o);
  EXPECT_THROW(missing.call(Json::object(), in("t0")), InputError);
}

TEST(CommandTool, DestroyingTheToolEndsAHangingProgram) {
  auto tool = std::make_unique<CommandTool>(helper("stuck", {"hang"}));
  EXPECT_TRUE(tool->call(Json::object(), in("t0", 100ms)).error);
  const std::optional<pid_t> pid = tool->pid();
  ASSERT_TRUE(pid.has_value());
  ASSERT_EQ(::kill(*pid, 0), 0);
  const auto start = Clock::now();
  tool.reset();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(::kill(*pid, 0), -1);  // gone and reaped: a zombie would still accept signal 0
  EXPECT_EQ(errno, ESRCH);
}

// The environment form (command_tool.h): a trajectory's first step resets the episode with the example's prompt
// and answer; replies carry an observation, a reward and done.
CommandToolOptions guessing_game() {
  CommandToolOptions o = helper("guess", {"guess"});
  o.environment = true;
  return o;
}

CallContext first_step(const std::string& trajectory, const std::string& answer) {
  CallContext c = in(trajectory);
  c.reset = EpisodeStart{"Guess my number.", answer};
  return c;
}

TEST(EnvironmentTool, AResetStartsTheEpisodeAndStepsAnswerWithRewardAndDone) {
  CommandTool game(guessing_game());
  EXPECT_TRUE(game.environment());
  const ToolResult low = game.call(Json{{"guess", 3}}, first_step("t0", "7"));  // reset with answer 7, then a step
  EXPECT_FALSE(low.error) << low.text;
  EXPECT_EQ(low.text, "higher");
  EXPECT_EQ(low.reward, 0.0);
  EXPECT_FALSE(low.done);
  const ToolResult right = game.call(Json{{"guess", 7}}, in("t0"));  // the same episode: no reset
  EXPECT_EQ(right.text, "correct");
  EXPECT_EQ(right.reward, 1.0);
  EXPECT_TRUE(right.done);
}

TEST(EnvironmentTool, EachTrajectoryHasItsOwnEpisode) {
  CommandTool game(guessing_game());
  game.call(Json{{"guess", 1}}, first_step("a", "5"));
  game.call(Json{{"guess", 1}}, first_step("b", "9"));
  EXPECT_EQ(game.call(Json{{"guess", 5}}, in("a")).text, "correct");
  EXPECT_EQ(game.call(Json{{"guess", 5}}, in("b")).text, "higher");
}

TEST(EnvironmentTool, AStepWithoutAResetIsTheProgramsErrorResult) {
  CommandTool game(guessing_game());
  const ToolResult r = game.call(Json{{"guess", 1}}, in("never-reset"));
  EXPECT_TRUE(r.error);
  EXPECT_EQ(r.text, "tool guess: no episode: the trajectory was never reset");
}

TEST(EnvironmentTool, AnEnvironmentsReplyLineIsJudgedByItsFields) {
  using detail::parse_reply;
  const auto ok = parse_reply(R"({"id": 4, "observation": "lower", "reward": 0.5, "done": false})", "g", 100, true);
  EXPECT_EQ(ok.problem, "");
  EXPECT_EQ(ok.id, 4);
  EXPECT_EQ(ok.result.text, "lower");
  EXPECT_EQ(ok.result.reward, 0.5);
  EXPECT_EQ(parse_reply(R"({"id": 4})", "g", 100, true).problem, "");  // a reset's reply: nothing but the id
  EXPECT_EQ(parse_reply(R"({"id": 4, "reward": "much"})", "g", 100, true).problem,
            "has a \"reward\" that is not a number");
  EXPECT_EQ(parse_reply(R"({"id": 4, "done": 1})", "g", 100, true).problem, "has a \"done\" that is not true or false");
  EXPECT_EQ(parse_reply(R"({"id": 4, "observation": 3})", "g", 100, true).problem,
            "has an \"observation\" that is not a string");
  // A plain command tool still needs its content.
  EXPECT_EQ(parse_reply(R"({"id": 4, "observation": "x"})", "g", 100).problem,
            "has neither a string \"content\" nor a string \"error\"");
}
