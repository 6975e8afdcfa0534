// The `model` reward on one rank: the score is the reward role's value at the
// last token of prompt + response (checked against a hand-run forward of each
// sequence alone), it does not depend on the micro-batch or on what else is in
// the batch, it is summed with the other rewards, and a reward role that does
// not share the policy's vocabulary or tokenizer is an InputError naming the
// reward's file:line:col and the fix. Layouts (tp, sp, dp) and the layout
// errors are in reward_model_mpi_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "hpcrl/config/model_arch.h"
#include "reward_model_setup.h"

namespace hpcrl::testing {
namespace {

const std::string kPolicy = "{init: {preset: tiny-2l}}";
const std::string kRm = "{init: {preset: tiny-2l}, head: value}";

std::vector<double> model_scores(algo::RewardFunction& f, const Samples& s) {
  std::vector<reward::RewardSample> text(s.prompts.size(), reward::RewardSample{"", "", ""});
  std::vector<double> out;
  for (const auto& r : f.score_batch(text, s.ids())) out.push_back(r.score);
  return out;
}

TEST(RewardModel, ScoreIsTheValueAtTheLastTokenOfAHandRunForward) {
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, kRm));
  Samples s = random_samples(7, 1);
  auto f = p->rewards({"rm"});
  std::vector<double> got = model_scores(f, s);
  ASSERT_EQ(got.size(), 7u);
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const double want = value_alone(*p->rm().model, s.prompts[i], s.responses[i]);
    EXPECT_NEAR(got[i], want, 1e-5 * std::max(1.0, std::abs(want)));
    // The position matters: the token before the last scores differently.
    std::vector<int32_t> shorter(s.responses[i].begin(), s.responses[i].end() - 1);
    EXPECT_GT(std::abs(value_alone(*p->rm().model, s.prompts[i], shorter) - want), 1e-4);
  }
}

TEST(RewardModel, ScoreDoesNotDependOnTheBatchOrTheMicroBatch) {
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, kRm));
  Samples one = random_samples(1, 2);
  auto alone = p->rewards({"rm"});
  const double score_alone = model_scores(alone, one).front();
  // The same sample after and between longer ones (more right padding), in several micro-batch sizes.
  Samples many = random_samples(6, 3);
  for (auto& r : many.responses) r.resize(r.size() + 12, 7);
  many.prompts.insert(many.prompts.begin() + 3, one.prompts[0]);
  many.responses.insert(many.responses.begin() + 3, one.responses[0]);
  for (int64_t micro : {0, 1, 2, 4}) {
    SCOPED_TRACE("micro_batch " + std::to_string(micro));
    auto f = p->rewards({"rm"}, micro);
    std::vector<double> got = model_scores(f, many);
    EXPECT_NEAR(got[3], score_alone, 1e-6 * std::max(1.0, std::abs(score_alone)));
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], value_alone(*p->rm().model, many.prompts[i], many.responses[i]), 1e-5);
  }
}

TEST(RewardModel, IsSummedWithTheVerifiableReward) {
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, kRm));
  Samples s = random_samples(2, 4);
  auto rm_only = p->rewards({"rm"});
  const std::vector<double> model = model_scores(rm_only, s);
  auto both = p->rewards({"math", "rm"});
  std::vector<reward::RewardSample> text{{"1+1", "so \\boxed{2}", "2"}, {"1+1", "\\boxed{3}", "2"}};
  auto got = both.score_batch(text, s.ids());
  EXPECT_TRUE(got[0].correct);
  EXPECT_FALSE(got[1].correct);
  EXPECT_DOUBLE_EQ(got[0].score, 1.0 + model[0]);
  EXPECT_DOUBLE_EQ(got[1].score, model[1]);
  EXPECT_NE(model[0], 0.0);
}

TEST(RewardModel, InitFromThePolicyCopiesItsWeightsAndSeedsTheMissingValueHead) {
  // The runner snapshots a reward role that starts from the policy when the stage starts.
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, "{init: {from: policy}, head: value}"));
  auto rm_params = p->rm().model->named_parameters();
  for (const auto& kv : p->policy().model->named_parameters())
    if (rm_params.contains(kv.key()))
      EXPECT_TRUE(at::equal(rm_params[kv.key()], kv.value())) << kv.key();
  EXPECT_GT(p->rm().model->score->weight.abs().sum().item<double>(), 0.0) << "the value head was never initialised";
  Samples s = random_samples(3, 5);
  auto f = p->rewards({"rm"});
  EXPECT_NEAR(model_scores(f, s)[1], value_alone(*p->rm().model, s.prompts[1], s.responses[1]), 1e-5);
}

TEST(RewardModel, AVocabularyOtherThanThePolicysIsAnInputError) {
  // A reward model with 256 token ids, written as an HF checkpoint by the project's writer.
  const std::string dir = "/tmp/hpcrl-rm-vocab-" + std::to_string(::getpid());
  ModelArch arch = model_arch_preset("tiny-2l");
  arch.vocab_size = 256;
  model::ModelOptions opts;
  opts.lm_head = false;
  opts.value_head = true;
  model::DecoderModel m(arch, parallel::ParallelContext{}, opts);
  model::save_pretrained(m, dir, true);
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, "{init: {path: " + dir + "}, head: value, tokenizer: byte}"));
  std::string err = input_error([&] { p->rewards({"math", "rm"}); });
  EXPECT_EQ(err.rfind(kRewardPos, 0), 0u) << err;
  EXPECT_NE(err.find("the reward model 'rm' has a vocabulary of 256 tokens but the policy 'policy' has 272"),
            std::string::npos) << err;
  EXPECT_NE(err.find("must share the policy's tokenizer and vocabulary"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(RewardModel, ATokenizerOtherThanThePolicysIsAnInputError) {
  const std::string qwen3 = std::string(HPCRL_DATA_DIR) + "/tokenizers/qwen3";
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, "{init: {preset: tiny-2l}, head: value, tokenizer: " + qwen3 + "}"));
  std::string err = input_error([&] { p->rewards({"rm"}); });
  EXPECT_EQ(err.rfind(kRewardPos, 0), 0u) << err;
  EXPECT_NE(err.find("the reward model 'rm' uses tokenizer " + qwen3), std::string::npos) << err;
  EXPECT_NE(err.find("but the policy 'policy' uses builtin"), std::string::npos) << err;
  EXPECT_NE(err.find("set models.rm.tokenizer to the policy's"), std::string::npos) << err;
}

TEST(RewardModel, TextOnlyRewardFunctionsRefuseAModelReward) {
  auto p = make_rm_pipeline(rm_pipeline_yaml(kPolicy, kRm));
  std::string err = input_error([&] { algo::RewardFunction(p->cfg, {"math", "rm"}); });
  EXPECT_EQ(err.rfind(kRewardPos, 0), 0u) << err;
  EXPECT_NE(err.find("runs only inside a grpo or ppo stage"), std::string::npos) << err;
}

}  // namespace
}  // namespace hpcrl::testing
