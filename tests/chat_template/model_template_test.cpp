// chat_template: model — the tokenizer's own Jinja template through
// io::ChatTemplate: it renders what the fixed renderers (themselves checked
// against HF) render for the fixture tokenizers, passes a `tools` list and
// enable_thinking through, and fails with the tokenizer's name when there is
// no template.
#include <gtest/gtest.h>

#include "hpcrl/io/chat_template.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/util/error.h"
#include "tokenizer/tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

using json = nlohmann::ordered_json;

const std::vector<ChatMessage> kThinkingTurns = {
    {"system", "Be brief."},
    {"user", "Is 91 prime?"},
    {"assistant", "<think>\n91 = 7 * 13\n</think>\n\nNo."},
    {"user", "Why?"}};

TEST(ModelTemplate, Qwen3FixtureMatchesTheFixedQwen3Renderer) {
  auto model = ChatTemplate::model(testing::fixture_tokenizer("qwen3"));
  auto fixed = ChatTemplate::named(config::ChatTemplate::qwen3);
  EXPECT_EQ(model.name(), "model");
  for (bool thinking : {true, false})
    EXPECT_EQ(model.render(kThinkingTurns, true, thinking), fixed.render(kThinkingTurns, true, thinking))
        << "enable_thinking=" << thinking;
}

TEST(ModelTemplate, Llama3FixtureMatchesTheFixedLlama3Renderer) {
  // The template writes bos_token itself; model() passes the tokenizer's "<|begin_of_text|>". (This
  // fixture's template appends the generation prompt unconditionally, so only `true` agrees.)
  auto model = ChatTemplate::model(testing::fixture_tokenizer("llama3"));
  EXPECT_EQ(model.render(kThinkingTurns, true), ChatTemplate::named(config::ChatTemplate::llama3).render(kThinkingTurns, true));
}

TEST(ModelTemplate, AutoPicksTheModelsOwnTemplate) {
  EXPECT_EQ(ChatTemplate::for_tokenizer(testing::fixture_tokenizer("qwen3")).name(), "model");
}

TEST(ModelTemplate, ToolsListReachesTheTemplate) {
  auto model = ChatTemplate::model(testing::fixture_tokenizer("qwen3"));
  json tools = json::parse(R"([{"type": "function", "function": {"name": "add", "parameters": {}}}])");
  std::string text = model.render_json(json::parse(R"([{"role": "user", "content": "2+2?"}])"), true,
                                       json{{"tools", tools}});
  // Qwen3 lists each tool as one tojson line inside <tools>.
  EXPECT_NE(text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {}}}\n"
                      "</tools>"),
            std::string::npos)
      << text;
}

TEST(ModelTemplate, FixedRenderersRefuseTools) {
  json tools = json::parse(R"([{"type": "function", "function": {"name": "add"}}])");
  EXPECT_THROW(ChatTemplate::named(config::ChatTemplate::chatml).render_json(json::parse(R"([{"role": "user", "content": "x"}])"), true,
                                                          json{{"tools", tools}}),
               InputError);
}

TEST(ModelTemplate, TokenizerWithoutTemplateIsNamedInTheError) {
  testing::TempDir dir;
  dir.write("tokenizer.json", testing::tiny_tokenizer_json({}).dump());
  auto tok = load_tokenizer(dir.path.string());
  try {
    ChatTemplate::model(*tok);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(tok->source()), std::string::npos) << msg;
    EXPECT_NE(msg.find("declares no chat_template"), std::string::npos) << msg;
  }
}

TEST(ModelTemplate, TemplateRaiseExceptionIsAnInputErrorWithItsMessage) {
  auto t = ChatTemplate::jinja("{% if messages[0].role != 'user' %}{{ raise_exception('first turn must be user') }}"
                               "{% endif %}",
                               "inline");
  try {
    t.render({{"assistant", "hi"}}, true);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("first turn must be user"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpcrl::io
