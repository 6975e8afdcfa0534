// Conversation rows (io/dataset_conversation.h): a tool trace becomes the
// prompt, the response with each tool message wrapped and marked inserted,
// an OpenAI tool_calls entry written as Qwen's templates write it; every other
// shape is an input error naming the row, the message and the fix; a JSONL
// file of them loads with its answers, and a truncated response keeps its
// marks inside the cut.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpcrl/io/dataset_conversation.h"
#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::io;
using Json = nlohmann::ordered_json;

namespace {

const ConversationFormat kTags{"<result>", "</result>"};

Example read(const std::string& messages, const ConversationFormat& f = kTags) {
  Example ex;
  read_conversation(Json::parse(messages), f, "d.jsonl:3", ex);
  return ex;
}

std::string error_of(const std::string& messages) {
  try {
    read(messages);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Conversation, AToolTraceIsThePromptAndTheResponseWithTheReplyInserted) {
  const Example ex = read(R"([{"role": "user", "content": "12*34="},
                              {"role": "assistant", "content": "<calc>12*34</calc>"},
                              {"role": "tool", "content": "408"},
                              {"role": "assistant", "content": "\\boxed{408}"}])");
  EXPECT_EQ(ex.prompt, "12*34=");
  EXPECT_EQ(ex.response, "<calc>12*34</calc><result>408</result>\\boxed{408}");
  // "<calc>12*34</calc>" is 18 bytes; "<result>408</result>" the next 20.
  ASSERT_EQ(ex.inserted.size(), 1u);
  EXPECT_EQ(ex.inserted[0], (std::pair<size_t, size_t>{18, 38}));
}

TEST(Conversation, QwensToolTurnWrapsAReplyBetweenTwoAssistantTurns) {
  const ConversationFormat qwen{"<|im_end|>\n<|im_start|>user\n<tool_response>\n",
                                "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"};
  const Example ex = read(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                              {"role": "tool", "content": "r"}, {"role": "assistant", "content": "b"}])",
                          qwen);
  EXPECT_EQ(ex.response, "a" + qwen.reply_open + "r" + qwen.reply_close + "b");
  EXPECT_EQ(ex.inserted[0].first, 1u);
  EXPECT_EQ(ex.inserted[0].second, ex.response.size() - 1);
}

TEST(Conversation, AnOpenAiToolCallIsWrittenAsQwensTemplatesWriteIt) {
  // arguments as JSON text (OpenAI), keys kept in their order; content before the call, separated by a newline.
  const Example ex = read(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "Let me compute.", "tool_calls": [{"type": "function",
        "function": {"name": "calculator", "arguments": "{\"expression\": \"12*34\", \"exact\": true}"}}]},
      {"role": "tool", "content": "408"}, {"role": "assistant", "content": "408"}])");
  const std::string call =
      "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"12*34\", \"exact\": "
      "true}}\n</tool_call>";
  EXPECT_EQ(ex.response.substr(0, call.size()), call);
  EXPECT_EQ(ex.inserted[0].first, call.size());
}

TEST(Conversation, ACallWithoutContentStartsTheResponse) {
  const Example ex = read(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
      {"role": "tool", "content": "1"}, {"role": "assistant", "content": "done"}])");
  EXPECT_EQ(ex.response.substr(0, 11), "<tool_call>");
}

TEST(Conversation, ASystemMessageIsRefusedWithWhereItGoes) {
  EXPECT_EQ(error_of(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                         {"role": "assistant", "content": "a"}])"),
            "d.jsonl:3: message 0: a system message in a conversation is not built; the dataset's system_prompt: "
            "gives every row one. Remove it from the row");
}

TEST(Conversation, ASecondUserMessageIsRefused) {
  const std::string e = error_of(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                     {"role": "user", "content": "more"}, {"role": "assistant", "content": "b"}])");
  EXPECT_NE(e.find("d.jsonl:3: message 2: role 'user' after the first message"), std::string::npos) << e;
}

TEST(Conversation, TwoToolMessagesInARowAreRefused) {
  const std::string e = error_of(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
      {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "b"}])");
  EXPECT_NE(e.find("message 3: a tool message must follow the assistant message that called it (tool before it)"),
            std::string::npos)
      << e;
}

TEST(Conversation, TwoAssistantMessagesInARowAreRefused) {
  const std::string e = error_of(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                     {"role": "assistant", "content": "b"}])");
  EXPECT_NE(e.find("message 2: two assistant messages in a row"), std::string::npos) << e;
}

TEST(Conversation, AConversationEndingWithAToolMessageIsRefused) {
  const std::string e = error_of(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                     {"role": "tool", "content": "1"}])");
  EXPECT_NE(e.find("message 2: the conversation ends with a tool message"), std::string::npos) << e;
}

TEST(Conversation, TwoCallsInOneMessageAreRefused) {
  const std::string e = error_of(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "",
      "tool_calls": [{"function": {"name": "f"}}, {"function": {"name": "g"}}]},
      {"role": "tool", "content": "1"}, {"role": "assistant", "content": "b"}])");
  EXPECT_NE(e.find("message 1: \"tool_calls\" must hold exactly one call"), std::string::npos) << e;
}

namespace {
std::string write_rows(const std::string& name, const std::string& rows) {
  const auto path = std::filesystem::temp_directory_path() / (name + std::to_string(getpid()) + ".jsonl");
  std::ofstream(path, std::ios::binary) << rows;
  return path.string();
}
}  // namespace

TEST(Conversation, AJsonlFileOfConversationsLoadsWithItsAnswersWhereGiven) {
  const std::string path = write_rows("conv", R"({"messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "<calc>1+1</calc>"}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "2"}], "answer": "2"}
{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
)");
  JsonlOptions o;
  o.messages_key = "messages";
  o.conversation = kTags;
  const Dataset ds = load_jsonl(path, o);
  std::filesystem::remove(path);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].prompt, "1+1=");
  EXPECT_EQ(ds[0].answer, "2");
  EXPECT_EQ(ds[0].response, "<calc>1+1</calc><result>2</result>2");
  EXPECT_EQ(ds[1].answer, "");  // no answer key: nothing for an evaluation to score
  EXPECT_TRUE(ds[1].inserted.empty());
}

TEST(Conversation, ATruncatedResponseKeepsItsInsertedRangeUpToTheCut) {
  // Counted in bytes: "<calc>1+1</calc>" (16) + "<result>2</result>" (18) + "2"; a cut at 20 bytes keeps 4 of the reply.
  const std::string path = write_rows("conv_cut", R"({"messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "<calc>1+1</calc>"}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "2"}]}
)");
  JsonlOptions o;
  o.messages_key = "messages";
  o.conversation = kTags;
  o.limits.max_response_tokens = 20;
  o.limits.long_response = LongResponsePolicy::kTruncate;
  o.limits.length = [](const std::string& s) { return s.size(); };
  const Dataset ds = load_jsonl(path, o);
  std::filesystem::remove(path);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].response.size(), 20u);
  ASSERT_EQ(ds[0].inserted.size(), 1u);
  EXPECT_EQ(ds[0].inserted[0], (std::pair<size_t, size_t>{16, 20}));
}

TEST(Conversation, ARowWithoutTheMessagesKeyNamesIt) {
  const std::string path = write_rows("conv_missing", "{\"turns\": []}\n");
  JsonlOptions o;
  o.messages_key = "messages";
  std::string e;
  try {
    load_jsonl(path, o);
  } catch (const InputError& err) {
    e = err.what();
  }
  std::filesystem::remove(path);
  EXPECT_NE(e.find(":1: missing key 'messages'"), std::string::npos) << e;
}
