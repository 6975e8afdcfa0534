// `hpcrl generate` input files: the three request kinds become the right ids
// (raw text with the tokenizer's BOS, a chat rendered with the template plus
// the generation prompt, ids as given), and every malformed line is an
// InputError naming FILE:LINE and the fix. Also the stop rules' tail decoding.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "hpcrl/io/chat_template.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/prompt_file.h"
#include "hpcrl/rollout/stop_rules.h"
#include "hpcrl/util/error.h"

namespace {

using namespace hpcrl;

class PromptFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hpcrl-prompts-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    tok_ = io::load_tokenizer("builtin");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& text) {
    std::string path = (dir_ / "p.jsonl").string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text, config::ChatTemplate tmpl = config::ChatTemplate::model) {
    std::string path = write(text);
    try {
      rollout::read_prompt_file(path, *tok_, 272, tmpl);
    } catch (const InputError& e) {
      std::string msg = e.what();
      if (msg.rfind(path, 0) == 0) msg = "FILE" + msg.substr(path.size());
      return msg;
    }
    return "(no InputError)";
  }

  std::filesystem::path dir_;
  std::unique_ptr<io::Tokenizer> tok_;
};

TEST_F(PromptFileTest, ReadsTheThreeRequestKinds) {
  std::string path = write("{\"prompt\": \"2+2=\", \"answer\": \"4\"}\n\n"
                           "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
                           "{\"prompt_ids\": [5, 6, 7]}\n");
  auto file = rollout::read_prompt_file(path, *tok_, 272);
  ASSERT_EQ(file.prompts.size(), 3u);
  EXPECT_EQ(file.prompts[0].ids, tok_->encode("2+2=", true));
  EXPECT_EQ(file.prompts[0].text, "2+2=");
  EXPECT_EQ(file.prompts[0].line, 1);
  const std::string chat = io::ChatTemplate::for_tokenizer(*tok_).render({{"user", "hi"}}, true);
  EXPECT_EQ(file.prompts[1].text, chat);
  EXPECT_EQ(file.prompts[1].ids, tok_->encode(chat, false));
  EXPECT_EQ(file.prompts[1].line, 3);
  EXPECT_EQ(file.prompts[2].ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(file.prompts[2].text, tok_->decode({5, 6, 7}));
  EXPECT_TRUE(file.chat);
  // A chat prompt also stops on the end-of-turn token.
  auto stops = rollout::stop_token_ids(*tok_, true);
  EXPECT_EQ(stops, (std::vector<int32_t>{tok_->eos_id(), tok_->token_to_id("<|im_end|>")}));
  EXPECT_EQ(rollout::stop_token_ids(*tok_, false), (std::vector<int32_t>{tok_->eos_id()}));
  // "none" concatenates the contents: no chat markup, no end-of-turn stop.
  auto plain = rollout::read_prompt_file(write("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"),
                                         *tok_, 272, config::ChatTemplate::none);
  EXPECT_EQ(plain.prompts[0].text, "hi");
  EXPECT_FALSE(plain.chat);
}

TEST_F(PromptFileTest, MalformedLinesNameTheLineAndTheFix) {
  const std::string shape = "each line must be a JSON object with one of \"prompt\" (text), \"messages\" "
                            "([{\"role\": .., \"content\": ..}]) or \"prompt_ids\" ([ids])";
  EXPECT_EQ(error_of(""), "FILE has no prompts: " + shape);
  EXPECT_EQ(error_of("\n  \n"), "FILE has no prompts: " + shape);
  EXPECT_EQ(error_of("{\"prompt\": \"a\"}\n[1, 2]\n"), "FILE:2: found array; " + shape);
  EXPECT_EQ(error_of("{\"promt\": \"a\"}\n"), "FILE:1: no request (\"promt\": did you mean \"prompt\"?); " + shape);
  EXPECT_EQ(error_of("{\"prompt\": \"a\", \"prompt_ids\": [1]}\n"),
            "FILE:1: give only one of \"prompt\", \"messages\" and \"prompt_ids\" per line");
  EXPECT_EQ(error_of("{\"prompt\": \"\"}\n"), "FILE:1: the prompt is empty; every prompt needs at least one token");
  EXPECT_EQ(error_of("{\"prompt_ids\": []}\n"),
            "FILE:1: \"prompt_ids\" is empty; every prompt needs at least one token");
  EXPECT_EQ(error_of("{\"prompt_ids\": [1, 272]}\n"),
            "FILE:1: prompt_ids[1] = 272 is outside the model's vocabulary [0, 272)");
  EXPECT_EQ(error_of("{\"prompt_ids\": [1, \"a\"]}\n"), "FILE:1: prompt_ids[1] is \"a\", not an integer token id");
  EXPECT_EQ(error_of("{\"messages\": [{\"role\": \"user\"}]}\n"),
            "FILE:1: messages[0] must be {\"role\": string, \"content\": string}");
  // Line 2 ends after its 14 characters: the error is at column 15.
  EXPECT_NE(error_of("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n").find("FILE:2:15: not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of("{\"prompt\": \"a\"}\n").find("(no InputError)"), 0u);  // a good file passes
}

TEST(StopRules, EndOnEosOnStopStringsAndAtTheLengthLimit) {
  auto tok = io::load_tokenizer("builtin");
  rollout::SamplingParams p;
  p.max_new_tokens = 40;
  p.eos_ids = {tok->eos_id()};
  p.stop = {"\\boxed{", "é"};
  rollout::StopRules rules(p, tok.get());
  std::vector<int32_t> ids = tok->encode("so the answer is \\boxed{42}");
  const std::string text = tok->decode(ids);
  const size_t done = text.find("\\boxed{") + std::string("\\boxed{").size();  // byte tokens: one per byte
  for (size_t n = 1; n <= ids.size(); ++n) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
    EXPECT_EQ(rules.check(prefix), n >= done ? "stop" : "") << n;
  }
  // A two-byte character split over two tokens completes the stop string only with its second byte.
  std::vector<int32_t> accent = tok->encode("caf\xC3\xA9");
  EXPECT_EQ(rules.check({accent.begin(), accent.end() - 1}), "");
  EXPECT_EQ(rules.check(accent), "stop");
  EXPECT_EQ(rules.check({5, tok->eos_id()}), "stop");
  EXPECT_EQ(rules.check(std::vector<int32_t>(40, 'a')), "length");
  EXPECT_EQ(rules.check(std::vector<int32_t>(39, 'a')), "");
  // Long responses: only the tail is decoded, matches far back were already reported.
  std::vector<int32_t> long_ids(35, 'x');
  auto tail = tok->encode("\\boxed{");
  long_ids.insert(long_ids.end(), tail.begin(), tail.end());
  EXPECT_EQ(rules.check(long_ids), "stop");
}

}  // namespace
