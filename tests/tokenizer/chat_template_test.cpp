// Chat templates: each fixed renderer produces exactly what HF's Jinja
// template in the fixture's tokenizer_config.json renders, and the ids of the
// rendered prompt are the known ids of those models' chat markup.
#include <gtest/gtest.h>

#include "hpcrl/io/chat_template.h"
#include "hpcrl/io/tokenizer_byte.h"
#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

const std::vector<ChatMessage> kSystemUser = {{"system", "You are a helpful assistant."}, {"user", "Hello"}};

TEST(ChatTemplate, DetectsFixtureTemplates) {
  EXPECT_EQ(ChatTemplate::detect(testing::fixture_tokenizer("qwen3").chat_template_jinja())->name(), "qwen3");
  EXPECT_EQ(ChatTemplate::detect(testing::fixture_tokenizer("llama3").chat_template_jinja())->name(), "llama3");
  EXPECT_EQ(ChatTemplate::detect(ByteTokenizer().chat_template_jinja())->name(), "chatml");
}

TEST(ChatTemplate, Qwen3NoThinkingSystemUser) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  auto t = ChatTemplate::named(config::ChatTemplate::qwen3);
  std::string text = t.render(kSystemUser, true, /*enable_thinking=*/false);
  EXPECT_EQ(text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(tok.encode(text), (std::vector<int32_t>{151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198,
                                                    151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198, 151667,
                                                    271, 151668, 271}));
}

TEST(ChatTemplate, Qwen3Thinking) {
  auto t = ChatTemplate::named(config::ChatTemplate::qwen3);
  EXPECT_EQ(t.render(kSystemUser, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.render({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3DropsReasoningOfEarlierTurns) {
  auto t = ChatTemplate::named(config::ChatTemplate::qwen3);
  std::vector<ChatMessage> msgs = {
      {"user", "1+1?"}, {"assistant", "<think>\nadd them\n</think>\n\n2"}, {"user", "2+2?"}};
  EXPECT_EQ(t.render(msgs, true),
            "<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  // The final assistant turn after the last query keeps its reasoning; without
  // any, the template still writes an empty think block.
  EXPECT_EQ(t.render({{"user", "q"}, {"assistant", "<think>\nr\n</think>\n\na"}}, false),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n");
  EXPECT_EQ(t.render({{"user", "q"}, {"assistant", "a"}}, false),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3ToolResponsesAreUserTurns) {
  auto t = ChatTemplate::named(config::ChatTemplate::qwen3);
  // The assistant turn is not the last message, so it gets no think block.
  std::vector<ChatMessage> msgs = {{"user", "q"}, {"assistant", "call"}, {"tool", "r1"}, {"tool", "r2"}};
  EXPECT_EQ(t.render(msgs, false),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\ncall<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
            "<|im_end|>\n");
}

TEST(ChatTemplate, Llama3SystemUser) {
  const Tokenizer& tok = testing::fixture_tokenizer("llama3");
  auto t = ChatTemplate::named(config::ChatTemplate::llama3);
  std::string text = t.render({{"system", "You are a helpful assistant."}, {"user", "  Hello \n"}}, true);
  // Contents are trimmed (the template's `| trim`).
  EXPECT_EQ(text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto ids = tok.encode(text);
  std::vector<int32_t> head = {128000, 128006, 9125, 128007, 271};
  std::vector<int32_t> tail = {128009, 128006, 882, 128007, 271, 9906, 128009, 128006, 78191, 128007, 271};
  ASSERT_GT(ids.size(), head.size() + tail.size());
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + head.size()), head);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - tail.size(), ids.end()), tail);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(ChatTemplate, ChatmlAndNone) {
  auto chatml = ChatTemplate::named(config::ChatTemplate::chatml);
  EXPECT_EQ(chatml.render(kSystemUser, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::named(config::ChatTemplate::none).render(kSystemUser, true), "You are a helpful assistant.Hello");
  ByteTokenizer tok;
  auto ids = tok.encode(chatml.render({{"user", "2+2"}}, true));
  EXPECT_EQ(ids.front(), ByteTokenizer::kImStart);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ByteTokenizer::kImEnd), 1);
}

TEST(ChatTemplate, Qwen25DefaultSystemPromptIsDetected) {
  // The system-turn part of Qwen2.5's template (no tools).
  std::string jinja =
      "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You "
      "are a helpful assistant.<|im_end|>\\n' }}\n{%- endif %}";
  auto t = ChatTemplate::detect(jinja);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->name(), "chatml");
  EXPECT_EQ(t->render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t->render({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, UnsupportedTemplatesAreNamedErrors) {
  EXPECT_FALSE(ChatTemplate::detect("{{ bos_token }}{% for m in messages %}[INST] {{ m.content }}{% endfor %}"));
  EXPECT_FALSE(ChatTemplate::detect("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: ...<|eot_id|>"));
  try {
    ChatTemplate::named(config::ChatTemplate::model);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("chat template 'model' is the tokenizer's own"), std::string::npos)
        << e.what();
  }
  try {
    ChatTemplate::named(config::ChatTemplate::qwen3).render({{"robot", "x"}}, false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("chat message 0 has role 'robot'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpcrl::io
