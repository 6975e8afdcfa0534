// `hpcrl eval`'s --data and --reward specs (src/cli/eval_inputs.cpp): the
// synthetic spec yields exactly the held-out split a pipeline with the same
// settings evaluates on; a pipeline's reward is read with its extractor order;
// JSONL keys and templates reach the prompt config; --tools reads a stage's
// tools, format and limits; malformed specs are InputErrors naming the flag,
// the bad part and the fix.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cli/eval_inputs.h"
#include "hpcrl/util/error.h"

namespace {

using namespace hpcrl;

const std::string kSource = HPCRL_SOURCE_DIR;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(EvalData, SyntheticSpecIsThePipelinesHeldOutSplit) {
  auto tok = io::load_tokenizer("builtin");
  // configs/quickstart.yaml: seed 1, digits 2, terms 2, eval 200 (train 20000 does not change the eval split).
  cli::EvalData from_pipeline = cli::load_eval_data(kSource + "/configs/quickstart.yaml:arith", {}, *tok);
  cli::EvalData from_spec = cli::load_eval_data("synthetic:digits=2,terms=2,eval=200", {}, *tok);
  ASSERT_EQ(from_pipeline.examples.size(), 200u);
  ASSERT_EQ(from_spec.examples.size(), 200u);
  for (size_t i = 0; i < 200; ++i) {
    EXPECT_EQ(from_spec.examples[i].prompt, from_pipeline.examples[i].prompt) << i;
    EXPECT_EQ(from_spec.examples[i].answer, from_pipeline.examples[i].answer) << i;
  }
  EXPECT_EQ(from_spec.config->kind, config::DataKind::synthetic);
  EXPECT_EQ(from_spec.label, "synthetic:task=arithmetic,digits=2,terms=2,ops=+,eval=200,seed=1");
  // Another seed is another split.
  cli::EvalData other = cli::load_eval_data("synthetic:digits=2,eval=200,seed=2", {}, *tok);
  int same = 0;
  for (size_t i = 0; i < 200; ++i) same += other.examples[i].prompt == from_spec.examples[i].prompt;
  EXPECT_LT(same, 20);
}

TEST(EvalData, JsonlFileIsReadWholeWithItsKeysAndTemplate) {
  auto tok = io::load_tokenizer("builtin");
  cli::JsonlFlags flags;
  flags.chat_template = "chatml";
  cli::EvalData gsm = cli::load_eval_data(kSource + "/data/gsm8k/test.jsonl", flags, *tok);
  ASSERT_EQ(gsm.examples.size(), 1319u);
  EXPECT_EQ(gsm.examples[0].answer, "18");  // "... #### 18": the marker's answer, as datasets read it
  EXPECT_EQ(gsm.config->kind, config::DataKind::jsonl);
  EXPECT_EQ(gsm.config->jsonl.chat_template, config::ChatTemplate::chatml);
}

TEST(EvalData, BadSpecsNameTheFlagAndTheFix) {
  auto tok = io::load_tokenizer("builtin");
  auto load = [&](const std::string& spec) { return error_of([&] { cli::load_eval_data(spec, {}, *tok); }); };
  EXPECT_EQ(load("synthetic:digit=2"),
            "--data synthetic:digit=2: unknown key 'digit'; did you mean 'digits'? "
            "(keys: task, digits, terms, ops, eval, seed)");
  EXPECT_EQ(load("synthetic:digits=two"), "--data synthetic:digits=two: digits=two is not an integer; write e.g. digits=2");
  EXPECT_EQ(load("synthetic:digits=12"), "--data synthetic.digits: 12 is outside 1..9 (digits per operand)");
  EXPECT_EQ(load("synthetic:eval"), "--data synthetic:eval: 'eval' is not key=value; write e.g. synthetic:digits=2,eval=200");
  EXPECT_NE(load("synthetic:train=5").find("train=… does not apply"), std::string::npos);
  EXPECT_EQ(load(kSource + "/configs/quickstart.yaml:arth"),
            "--data " + kSource + "/configs/quickstart.yaml:arth: " + kSource +
                "/configs/quickstart.yaml has no data entry 'arth'; did you mean 'arith'? (it has: arith)");
  cli::JsonlFlags flags;
  flags.chat_template = "chatlm";
  EXPECT_EQ(error_of([&] { cli::load_eval_data(kSource + "/data/gsm8k/test.jsonl", flags, *tok); }),
            "--chat-template 'chatlm': did you mean 'chatml'? (one of none, chatml, qwen3, llama3, model)");
}

TEST(EvalReward, VerifiableFlagsAndPipelineRewards) {
  cli::RewardFlags flags;
  flags.extract = "boxed, last_number";
  flags.format_bonus = 0.25;
  cli::EvalReward r = cli::parse_reward(flags);
  EXPECT_EQ(r.config.extract, (std::vector<reward::Extractor>{reward::Extractor::kBoxed, reward::Extractor::kLastNumber}));
  EXPECT_DOUBLE_EQ(r.config.format_bonus, 0.25);
  EXPECT_EQ(r.label, "verifiable (extract: boxed, last_number; format_bonus 0.25)");
  EXPECT_EQ(cli::parse_reward({}).label, "verifiable (extract: boxed, answer_tag, hash, answer_is, last_number)");

  // quickstart.yaml: math: {type: verifiable, extract: [boxed, last_number]}; the only reward, so no name needed.
  cli::RewardFlags pipe;
  pipe.spec = kSource + "/configs/quickstart.yaml";
  cli::EvalReward q = cli::parse_reward(pipe);
  EXPECT_EQ(q.config.extract, (std::vector<reward::Extractor>{reward::Extractor::kBoxed, reward::Extractor::kLastNumber}));
  EXPECT_EQ(q.label, pipe.spec + ":math (extract: boxed, last_number)");
  pipe.spec += ":math";
  EXPECT_EQ(cli::parse_reward(pipe).config.extract, q.config.extract);
}

TEST(EvalReward, BadSpecsNameTheFlagAndTheFix) {
  auto parse = [](cli::RewardFlags f) { return error_of([&] { cli::parse_reward(f); }); };
  cli::RewardFlags f;
  f.spec = "verifable";
  EXPECT_EQ(parse(f), "--reward 'verifable': did you mean 'verifiable'?; expected 'verifiable' (with "
                      "--extract/--format-bonus) or a pipeline file PIPELINE.yaml[:REWARD] whose rewards: section holds it");
  f = {};
  f.extract = "boxed,boxd";
  EXPECT_NE(parse(f).find("--extract[1]"), std::string::npos) << parse(f);
  EXPECT_NE(parse(f).find("did you mean 'boxed'"), std::string::npos) << parse(f);
  f.extract = "boxed,boxed";
  EXPECT_EQ(parse(f), "--extract[1]: extractor 'boxed' is listed twice; remove the repeat");
  f = {};
  f.format_bonus = -1;
  EXPECT_EQ(parse(f), "--format-bonus -1: must be >= 0");
  f = {};
  f.spec = kSource + "/configs/quickstart.yaml:maths";
  EXPECT_EQ(parse(f), "--reward " + f.spec + ": " + kSource +
                          "/configs/quickstart.yaml has no rewards entry 'maths'; did you mean 'math'? (it has: math)");
  f.spec = kSource + "/configs/quickstart.yaml";
  f.extract = "boxed";
  EXPECT_NE(parse(f).find("--extract and --format-bonus apply to --reward verifiable"), std::string::npos);
}

TEST(EvalTools, AStagesToolsFormatAndLimitsAreRead) {
  // tiny_tools.yaml: stage 0 (sft) and stage 1 (grpo, max_turns 2) call the calculator in <calc> tags.
  const std::string file = kSource + "/tests/e2e/data/tiny_tools.yaml";
  EXPECT_EQ(cli::load_eval_tools("", 56).kit, nullptr);
  const cli::EvalTools grpo = cli::load_eval_tools(file + ":1", 56);
  ASSERT_NE(grpo.kit, nullptr);
  ASSERT_EQ(grpo.kit->tools.size(), 1u);
  EXPECT_EQ(grpo.kit->tools[0]->name(), "calculator");
  EXPECT_EQ(grpo.kit->format.open, "<calc>");
  EXPECT_EQ(grpo.kit->limits.max_turns, 2);
  EXPECT_EQ(grpo.kit->limits.reply_tokens, 12);
  EXPECT_EQ(grpo.label, file + ":1 (calculator)");
}

TEST(EvalTools, BadSpecsNameTheFlagAndTheFix) {
  const std::string file = kSource + "/tests/e2e/data/tiny_tools.yaml";
  auto load = [](const std::string& spec, int64_t max_new) {
    return error_of([&] { cli::load_eval_tools(spec, max_new); });
  };
  EXPECT_EQ(load("calculator", 56), "--tools 'calculator': expected a pipeline file, PIPELINE.yaml[:STAGE], whose "
                                    "stage STAGE (its index in stages:) lists the tools");
  EXPECT_NE(load(file, 56).find("has 2 entries (0, 1)"), std::string::npos) << load(file, 56);
  EXPECT_NE(load(file + ":2", 56).find("has no stages (with tools) entry '2'"), std::string::npos)
      << load(file + ":2", 56);
  EXPECT_EQ(load(file + ":0", 12), "--tools " + file + ":0: its replies take up to 12 tokens (reply_tokens), which "
                                   "leaves no room in --max-new-tokens 12 for the model's answer after one: raise "
                                   "--max-new-tokens above 12");
  const std::string none = kSource + "/configs/quickstart.yaml";
  EXPECT_NE(load(none, 56).find("has 0 entries (none)"), std::string::npos) << load(none, 56);
}

}  // namespace
