// The reward's contract as a table: (response, gold answer) → correct or not,
// with the default extractor order and no format bonus. Each row is its own
// test case, named after what it pins down, so a regression names the
// convention that broke.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "hpcrl/reward/verifiable.h"

using namespace hpcrl::reward;

namespace {

struct Case {
  const char* name;
  const char* response;
  const char* gold;
  bool correct;
};

const Case kCases[] = {
    // \boxed{…}
    {"BoxedInteger", "So the total is \\boxed{132}.", "132", true},
    {"BoxedNestedFrac", "The ratio is \\boxed{\\frac{1}{2}}", "0.5", true},
    {"BoxedLastWins", "First \\boxed{3}, wait, actually \\boxed{4}", "4", true},
    {"BoxedEarlierIgnored", "First \\boxed{3}, wait, actually \\boxed{4}", "3", false},
    {"Fbox", "hence \\fbox{7}", "7", true},
    {"BoxedTextUnits", "\\boxed{\\text{5 apples}}", "5", true},
    {"BoxedThousands", "\\boxed{1,234}", "1234", true},
    {"BoxedDollarDecimal", "\\boxed{\\$18.00}", "18", true},
    {"BoxedDfrac", "\\boxed{\\dfrac{3}{4}}", "0.75", true},
    {"BoxedTfrac", "\\boxed{\\tfrac{3}{4}}", "3/4", true},
    {"BoxedFracShorthand", "\\boxed{\\frac12}", "0.5", true},
    {"BoxedNegativeFrac", "\\boxed{-\\frac{1}{2}}", "-0.5", true},
    {"BoxedFracNegativeNumerator", "\\boxed{\\frac{-1}{2}}", "-1/2", true},
    {"BoxedPercent", "\\boxed{50\\%}", "50", true},
    {"BoxedThinSpaces", "\\boxed{1\\,000\\,000}", "1000000", true},
    {"BoxedBraceComma", "\\boxed{1{,}000}", "1000", true},
    {"BoxedBigIntegersExact", "\\boxed{1000001}", "1000000", false},
    {"BoxedTrailingZero", "\\boxed{72.0}", "72", true},
    {"BoxedTrailingZeros", "\\boxed{72.50}", "72.5", true},
    {"DecimalTooCoarseForThird", "\\boxed{0.333}", "1/3", false},
    {"DecimalCloseToThird", "\\boxed{0.3333333}", "\\frac{1}{3}", true},
    {"TerminatingDecimalsCompareExactly", "\\boxed{1000000.5}", "1000000", false},
    {"DegreesCirc", "\\boxed{30^\\circ}", "30", true},
    {"DegreeSign", "\\boxed{30\xC2\xB0}", "30", true},
    {"VariablePrefix", "\\boxed{x = 5}", "5", true},
    {"LeftRightParens", "\\boxed{\\left( 5 \\right)}", "5", true},
    {"TextAnswerCase", "\\boxed{ B }", "b", true},
    {"TextAnswerWhitespace", "\\boxed{x+1}", "x + 1", true},
    {"TextVsNumberNeverEqual", "\\boxed{x+1}", "1", false},
    {"UnclosedBoxedFallsBack", "so it is \\boxed{12", "12", true},
    {"EmptyBoxedFallsBack", "\\boxed{} the result is 9", "9", true},
    {"ReducedFractions", "\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", true},
    {"DecimalVsFraction", "\\boxed{0.5}", "1/2", true},
    {"TwoThirds", "\\boxed{0.6666667}", "2/3", true},
    {"HugeIntegerSame", "\\boxed{123456789012345678901234567890}", "123456789012345678901234567890", true},
    {"MixedSeparatorsDollar", "\\boxed{\\$1,234.50}", "1234.5", true},
    {"WrappedInParens", "\\boxed{(5)}", "5", true},
    {"TupleKeepsParens", "\\boxed{(1, 2)}", "(1,2)", true},
    {"MathDelimiters", "The answer is \\(42\\).", "42", true},
    // <answer> tags
    {"AnswerTag", "<answer>42</answer>", "42", true},
    {"AnswerTagLastWins", "<answer>41</answer> no, <answer> 42 </answer>", "42", true},
    {"AnswerTagUnclosedFallsBack", "<answer>17", "17", true},
    // "the answer is"
    {"AnswerIs", "The answer is 42.", "42", true},
    {"AnswerIsDollarMath", "Therefore, the final answer is $3.5$.", "7/2", true},
    {"AnswerColonBoldUnits", "**Answer:** 1,200 dollars", "1200", true},
    {"AnswerColonLetter", "Answer: B", "B", true},
    {"AnswerIsSentenceEnd", "The answer is 12 apples. I think it is right.", "12", true},
    {"AnswerNextLine", "Final Answer:\n\n-7", "-7", true},
    // #### (GSM8K)
    {"Hash", "She has 48+24=72 clips.\n#### 72", "72", true},
    {"HashNegative", "#### -3", "-3", true},
    {"HashThousands", "#### 1,200", "1200", true},
    {"HashBeatsEarlierAnswerIs", "The answer is 5.\n#### 6", "6", true},
    // last number
    {"LastNumber", "so she has 5 apples and 7 oranges", "7", true},
    {"LastNumberDollars", "It costs $2,500 total.", "2500", true},
    {"LastNumberNegative", "The temperature fell to -4 degrees", "-4", true},
    {"LastNumberHyphenIsNotSign", "it takes 3-4 hours", "4", true},
    {"LastNumberFraction", "half of it is 1/2", "0.5", true},
    {"LastNumberSentencePeriod", "x is 2.50.", "2.5", true},
    {"LastNumberExponent", "Total: 1e3", "1000", true},
    {"LastNumberLatexFrac", "so we get \\frac{3}{8}", "0.375", true},
    {"NoAnswerAtAll", "I don't know", "5", false},
    // normalisation details
    {"PercentAfterSpace", "\\boxed{50 \\%}", "50", true},
    // A percentage also reads as its fraction (math_equivalence.h): 50% = 0.5.
    {"PercentAlsoScaled", "\\boxed{50\\%}", "0.5", true},
    {"PercentWrongEitherWay", "\\boxed{50\\%}", "0.05", false},
    {"UnicodeMinus", "\\boxed{\xE2\x88\x92" "5}", "-5", true},
    {"EuroPrefix", "\\boxed{\xE2\x82\xAC" "20}", "20", true},
    {"NumberThenMoreNumbersIsText", "\\boxed{5 hours and 30 minutes}", "5", false},
    {"ListAsText", "\\boxed{2, 3}", "2,3", true},
    // Expressions are evaluated exactly (math_equivalence.h): 0.1 + 0.2 = 0.3.
    {"ExpressionEqualsItsValue", "\\boxed{0.1 + 0.2}", "0.3", true},
    {"ExpressionNotAnotherValue", "\\boxed{0.1 + 0.2}", "0.30001", false},
    {"PlusSign", "\\boxed{+7}", "7", true},
    {"DoubledBraces", "\\boxed{{9}}", "9", true},
    {"MixedNumber", "\\boxed{3 1/2}", "3.5", true},
    {"PowerEvaluated", "\\boxed{2^{3}}", "8", true},
    {"RadicalsSimplified", "\\boxed{2\\sqrt{2}}", "\\sqrt{8}", true},
    {"GluedLetterIsAVariable", "\\boxed{5x}", "5", false},
    {"NegativeZero", "\\boxed{-0}", "0", true},
    {"LeadingDot", "\\boxed{.5}", "1/2", true},
    {"TextWrapperWord", "\\boxed{\\text{Monday}}", "monday", true},
    {"GoldWithDollarAndComma", "\\boxed{2500}", "$2,500", true},
    {"WrongValue", "\\boxed{131}", "132", false},
    // <think> regions
    {"AnswerAfterThink", "<think>7+5=12, so maybe \\boxed{3}</think> The answer is 5", "5", true},
    {"UnclosedThinkHasNoAnswer", "<think>7+5=12 so 12", "12", false},
    {"PromptOpenedThink", "adding 7 and 5 gives 12</think>\\boxed{12}", "12", true},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class AnswerCase : public ::testing::TestWithParam<Case> {};

TEST_P(AnswerCase, ScoresAsExpected) {
  const Case& c = GetParam();
  VerifiableReward reward;
  RewardResult r = reward.score(c.response, c.gold);
  EXPECT_EQ(r.correct, c.correct) << "response: " << c.response << "\ngold: " << c.gold
                                  << "\nextracted: '" << r.extracted << "' by " << r.extractor;
  EXPECT_EQ(r.score, c.correct ? 1.0 : 0.0);
}

INSTANTIATE_TEST_SUITE_P(Table, AnswerCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
