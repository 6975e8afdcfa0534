// Reading a model's tool call in the qwen and tags formats.
#include <gtest/gtest.h>

#include "hpcrl/tools/tool_call.h"
#include "tools/tool_testing.h"

namespace {

using hpcrl::testing::calc_tags;

using namespace hpcrl::tools;


TEST(ToolCall, AQwenCallGivesItsNameAndArguments) {
  const std::string turn =
      "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"12*34\"}}\n</tool_call>";
  const auto call = parse_call(turn, ToolCallFormat::qwen(), {"search", "calculator"});
  EXPECT_EQ(call.error, "");
  EXPECT_EQ(call.name, "calculator");
  EXPECT_EQ(call.arguments["expression"], "12*34");
}

TEST(ToolCall, ArgumentsWrittenAsAJsonStringAreRead) {
  const std::string turn = "<tool_call>{\"name\": \"calculator\", \"arguments\": \"{\\\"expression\\\": \\\"1+1\\\"}\"}</tool_call>";
  EXPECT_EQ(parse_call(turn, ToolCallFormat::qwen(), {"calculator"}).arguments["expression"], "1+1");
}

TEST(ToolCall, TheLastOpenTagBeforeTheCloseStartsTheCall) {
  // Two calls in one turn text: the second is the one the close tag ends.
  const auto call = parse_call("<calc>1+1</calc>=2 and <calc>6*7</calc>", calc_tags(), {"calculator"});
  EXPECT_EQ(call.arguments, "6*7");
  EXPECT_EQ(call.name, "calculator");
}

TEST(ToolCall, AnUnknownToolIsAnErrorListingTheTools) {
  const auto call = parse_call("<tool_call>{\"name\": \"python\"}</tool_call>", ToolCallFormat::qwen(), {"calculator"});
  EXPECT_EQ(call.error, "there is no tool \"python\" (tools: calculator)");
}

TEST(ToolCall, MalformedCallsAreErrors) {
  EXPECT_NE(parse_call("<tool_call>{oops</tool_call>", ToolCallFormat::qwen(), {"c"}).error.find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(parse_call("<tool_call>{\"arguments\": {}}</tool_call>", ToolCallFormat::qwen(), {"c"}).error.find(
                "no \"name\""),
            std::string::npos);
  EXPECT_NE(parse_call("12*34</calc>", calc_tags(), {"c"}).error.find("never opened"), std::string::npos);
}

TEST(ToolCall, ATurnEndsOnlyWithTheCloseTag) {
  EXPECT_TRUE(ends_with_call("x <calc>1</calc>", calc_tags()));
  EXPECT_FALSE(ends_with_call("x <calc>1</calc> ", calc_tags()));
  EXPECT_FALSE(ends_with_call("</cal", calc_tags()));
}

}  // namespace
