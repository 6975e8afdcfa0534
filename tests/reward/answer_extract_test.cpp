// Extractors one by one: what each returns (raw text, before normalisation),
// that the configured order decides, and that config names are validated.
#include <gtest/gtest.h>

#include "hpcrl/reward/answer_extract.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::reward;

TEST(ExtractBoxed, NestedBracesAndLastOne) {
  EXPECT_EQ(extract_boxed("a \\boxed{1} b \\boxed{\\frac{\\sqrt{2}}{2}} c").value(), "\\frac{\\sqrt{2}}{2}");
  EXPECT_EQ(extract_boxed("\\boxed {  42 } ").value(), "42");
  EXPECT_EQ(extract_boxed("\\fbox{9} then \\boxed{8}").value(), "8");
  EXPECT_EQ(extract_boxed("\\boxed{8} then \\fbox{9}").value(), "9");
  EXPECT_EQ(extract_boxed("$\\boxed 5$").value(), "5");
}

TEST(ExtractBoxed, TruncatedOrMissingFindsNothing) {
  EXPECT_FALSE(extract_boxed("\\boxed{1} and finally \\boxed{\\frac{3}{4").has_value());
  EXPECT_FALSE(extract_boxed("no box here").has_value());
  EXPECT_FALSE(extract_boxed("\\boxedanswer{3}").has_value());
  EXPECT_FALSE(extract_boxed("\\boxed{   }").has_value());
}

TEST(ExtractBoxed, EscapedBracesDoNotCloseTheGroup) {
  EXPECT_EQ(extract_boxed("\\boxed{\\{1, 2\\}}").value(), "\\{1, 2\\}");
}

TEST(ExtractAnswerTag, LastClosedPair) {
  EXPECT_EQ(extract_answer_tag("<answer>1</answer><answer>\n 2 \n</answer>").value(), "2");
  EXPECT_FALSE(extract_answer_tag("<answer>3").has_value());
  EXPECT_FALSE(extract_answer_tag("</answer> 3").has_value());
}

TEST(ExtractAnswerIs, PhrasesAndSentenceEnd) {
  EXPECT_EQ(extract_answer_is("So the answer is 3.5. Done").value(), "3.5");
  EXPECT_EQ(extract_answer_is("THE ANSWER IS: 12 eggs").value(), "12 eggs");
  EXPECT_EQ(extract_answer_is("answer = -4\nmore text").value(), "-4");
  EXPECT_EQ(extract_answer_is("The answer would be 6, right").value(), "6, right");
  EXPECT_EQ(extract_answer_is("answer is 1. Wait, the answer is 2.").value(), "2");
  EXPECT_FALSE(extract_answer_is("I answered it").has_value());
}

TEST(ExtractHash, RestOfLine) {
  EXPECT_EQ(extract_hash("work\n#### 1,080\n").value(), "1,080");
  EXPECT_EQ(extract_hash("#### 1\n#### 2").value(), "2");
  EXPECT_FALSE(extract_hash("####   \n").has_value());
}

TEST(ExtractLastNumber, TokensWithSeparatorsSignsAndFractions) {
  EXPECT_EQ(extract_last_number("from 1,234.5 to 2,000,000 units").value(), "2,000,000");
  EXPECT_EQ(extract_last_number("values 3,4,5").value(), "5");
  EXPECT_EQ(extract_last_number("x = -12 now").value(), "-12");
  EXPECT_EQ(extract_last_number("pages 10-12").value(), "12");
  EXPECT_EQ(extract_last_number("rate 3/4 and 50%").value(), "50%");
  EXPECT_EQ(extract_last_number("gives \\frac{1}{3} exactly").value(), "\\frac{1}{3}");
  EXPECT_EQ(extract_last_number("at .25 each").value(), ".25");
  EXPECT_FALSE(extract_last_number("no digits").has_value());
}

TEST(ExtractAnswer, OrderDecidesAndReportsExtractor) {
  std::string text = "The answer is 5.\n\\boxed{6}\n#### 7";
  auto a = extract_answer(text, {Extractor::kHash, Extractor::kBoxed});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->answer, "7");
  EXPECT_EQ(a->by, Extractor::kHash);
  auto b = extract_answer(text, default_extractors());
  EXPECT_EQ(b->answer, "6");
  EXPECT_STREQ(extractor_name(b->by), "boxed");
  auto c = extract_answer(text, {Extractor::kAnswerIs});
  EXPECT_EQ(c->answer, "5");
  EXPECT_FALSE(extract_answer("\\boxed{1}", {Extractor::kHash, Extractor::kAnswerTag}).has_value());
}

TEST(ExtractorConfig, UnknownNameSuggestsAndListsValid) {
  try {
    parse_extractors({"boxed", "last_numbr"}, "rewards.math.extract");
    FAIL() << "no error";
  } catch (const InputError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("rewards.math.extract[1]: unknown answer extractor 'last_numbr'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'last_number'?"), std::string::npos) << m;
    EXPECT_NE(m.find("valid extractors: boxed, answer_tag, answer_is, hash, last_number"), std::string::npos) << m;
  }
}

TEST(ExtractorConfig, RepeatAndEmptyAreErrors) {
  EXPECT_EQ(parse_extractors({"hash", "boxed"}, "x"), (std::vector<Extractor>{Extractor::kHash, Extractor::kBoxed}));
  try {
    parse_extractors({"hash", "boxed", "hash"}, "rewards.r.extract");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rewards.r.extract[2]: extractor 'hash' is listed twice"), std::string::npos);
  }
  EXPECT_THROW(parse_extractors({}, "rewards.r.extract"), InputError);
}
