// VerifiableReward as the rollout loop sees it: result fields, the <think>
// format rule, the bonus arithmetic, and config validation.
#include <gtest/gtest.h>

#include "hpcrl/reward/verifiable.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::reward;

namespace {
VerifiableReward with_bonus(double bonus) {
  VerifiableRewardConfig c;
  c.format_bonus = bonus;
  return VerifiableReward(c);
}
}  // namespace

TEST(VerifiableReward, ResultNamesExtractionAndExtractor) {
  RewardResult r = VerifiableReward().score("7+5=12;4+8+1=13;\\boxed{132}", "132");
  EXPECT_TRUE(r.correct);
  EXPECT_FALSE(r.format_ok);
  EXPECT_EQ(r.extracted, "132");
  EXPECT_EQ(r.extractor, "boxed");
  EXPECT_EQ(r.score, 1.0);
  RewardResult none = VerifiableReward().score("no idea", "132");
  EXPECT_FALSE(none.correct);
  EXPECT_EQ(none.extracted, "");
  EXPECT_EQ(none.extractor, "");
  EXPECT_EQ(none.score, 0.0);
}

TEST(VerifiableReward, FormatBonusAddsToCorrectness) {
  VerifiableReward r = with_bonus(0.1);
  const std::string good = "<think>7+5=12, carry 1; 4+8+1=13</think>\n\\boxed{132}";
  EXPECT_DOUBLE_EQ(r.score(good, "132").score, 1.1);
  EXPECT_DOUBLE_EQ(r.score(good, "133").score, 0.1);
  EXPECT_TRUE(r.score(good, "133").format_ok);
  EXPECT_DOUBLE_EQ(r.score("\\boxed{132}", "132").score, 1.0);
}

TEST(ThinkFormat, AcceptsOpenedOrPrefilledThinking) {
  auto order = default_extractors();
  EXPECT_TRUE(think_format_ok("<think>work</think><answer>3</answer>", order));
  EXPECT_TRUE(think_format_ok("  \n<think>\nwork\n</think>\nThe answer is 3.", order));
  EXPECT_TRUE(think_format_ok("work done in a prompt-opened block</think> \\boxed{3}", order));
}

TEST(ThinkFormat, RejectsMalformedBlocks) {
  auto order = default_extractors();
  EXPECT_FALSE(think_format_ok("\\boxed{3}", order));                                  // no thinking
  EXPECT_FALSE(think_format_ok("<think>  </think>\\boxed{3}", order));                 // blank thinking
  EXPECT_FALSE(think_format_ok("<think>a</think><think>b</think>\\boxed{3}", order));  // two blocks
  EXPECT_FALSE(think_format_ok("x <think>a</think>\\boxed{3}", order));                // text before <think>
  EXPECT_FALSE(think_format_ok("<think>a</think> nothing to extract", {Extractor::kBoxed}));
  EXPECT_FALSE(think_format_ok("<think>a \\boxed{3}", order));                         // never closed
  EXPECT_FALSE(think_format_ok("</think>a<think>\\boxed{3}", order));                  // wrong order
}

TEST(AnswerRegion, AfterThinkOrNothingWhenUnclosed) {
  EXPECT_EQ(answer_region("<think>1</think> 2").value(), " 2");
  EXPECT_EQ(answer_region("plain 3").value(), "plain 3");
  EXPECT_FALSE(answer_region("<think>still thinking 4").has_value());
}

TEST(VerifiableReward, ExtractorOrderComesFromConfig) {
  VerifiableRewardConfig c;
  c.extract = {Extractor::kLastNumber};
  EXPECT_TRUE(VerifiableReward(c).score("\\boxed{5} then 6", "6").correct);
  EXPECT_FALSE(VerifiableReward().score("\\boxed{5} then 6", "6").correct);
}

TEST(VerifiableReward, ConfigErrorsNameTheField) {
  VerifiableRewardConfig c;
  c.format_bonus = -0.5;
  try {
    VerifiableReward r(c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("format_bonus must be a finite number >= 0 (got -0.5)"), std::string::npos)
        << e.what();
  }
  VerifiableRewardConfig t;
  t.rel_tol = 0.5;
  EXPECT_THROW(VerifiableReward{t}, InputError);
  VerifiableRewardConfig e;
  e.extract.clear();
  EXPECT_THROW(VerifiableReward{e}, InputError);
}
