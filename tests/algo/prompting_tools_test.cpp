// A stage's tools reach its prompts through the model's own chat template: a
// jsonl dataset with `chat_template: model` renders the tools' schemas from
// the template's `tools` variable (Qwen3's fixture lists them inside
// <tools>), and the prompt without tools is the plain one.
#include <gtest/gtest.h>

#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/tools/calculator.h"
#include "tokenizer/tokenizer_test_util.h"

namespace {

using namespace hpcrl;

config::DatasetConfig qwen3_model_template() {
  config::DatasetConfig data;
  data.kind = config::DataKind::jsonl;
  data.jsonl.chat_template = config::ChatTemplate::model;
  return data;
}

TEST(PromptingWithTools, TheModelTemplateListsTheStagesTools) {
  const auto& tok = io::testing::fixture_tokenizer("qwen3");
  const config::DatasetConfig data = qwen3_model_template();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array({tools::Calculator().schema()});
  io::Example ex;
  ex.prompt = "What is 482*739?";
  const std::string with = algo::PromptBuilder(tok, &data, tools).prompt_text(ex);
  const std::string without = algo::PromptBuilder(tok, &data).prompt_text(ex);
  // Qwen3 writes each tool as a tojson line inside <tools>: the calculator's name and its parameter.
  const size_t list = with.find("<tools>\n");
  ASSERT_NE(list, std::string::npos) << with;
  EXPECT_NE(with.find("\"name\": \"calculator\"", list), std::string::npos) << with;
  EXPECT_NE(with.find("\"expression\"", list), std::string::npos) << with;
  EXPECT_EQ(without.find("<tools>"), std::string::npos) << without;
  EXPECT_NE(with.find("What is 482*739?"), std::string::npos);
  EXPECT_NE(without.find("<|im_start|>user\nWhat is 482*739?<|im_end|>\n<|im_start|>assistant\n"), std::string::npos);
}

}  // namespace
