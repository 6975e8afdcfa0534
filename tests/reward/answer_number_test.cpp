// Number grammar and the equality rule: exact rationals where the text is
// exact, a relative tolerance only where a decimal cannot be.
#include <gtest/gtest.h>

#include "hpcrl/reward/answer_normalize.h"
#include "hpcrl/reward/answer_number.h"

using namespace hpcrl::reward;

namespace {
Number num(const std::string& s) {
  auto n = parse_number(s);
  EXPECT_TRUE(n.has_value()) << s;
  return n.value_or(Number{});
}
}  // namespace

TEST(ParseNumber, ExactReducedRationals) {
  EXPECT_EQ(to_string(num("1,234,567")), "1234567");
  EXPECT_EQ(to_string(num("-0.50")), "-1/2");
  EXPECT_EQ(to_string(num("\\frac{6}{8}")), "3/4");
  EXPECT_EQ(to_string(num("\\dfrac{1.5}{3}")), "1/2");
  EXPECT_FALSE(parse_number("12/-4").has_value());     // sign inside a bare fraction is not a number
  EXPECT_EQ(to_string(num("2.5e-3")), "1/400");
  EXPECT_EQ(to_string(num("1E6")), "1000000");
  EXPECT_TRUE(num("2.5e-3").decimal);
  EXPECT_FALSE(num("3/4").decimal);
  EXPECT_TRUE(num("25%").percent);
  EXPECT_EQ(num("25%").value, 25.0);
}

TEST(ParseNumber, RejectsNonNumbers) {
  for (const char* s : {"", "abc", "1 2", "3/0", "\\frac{1}{0}", "1,23", "--5", "5+", "\\frac{a}{b}", "1.2.3"}) {
    EXPECT_FALSE(parse_number(s).has_value()) << s;
  }
}

TEST(ParseNumber, OverflowKeepsDoubleValue) {
  Number n = num("123456789012345678901234567890123456789012");  // 42 digits
  EXPECT_FALSE(n.exact);
  EXPECT_DOUBLE_EQ(n.value, 1.23456789012345678901234567890123456789012e41);
  Number big = num("98765432109876543210");  // fits i128, not int64
  EXPECT_FALSE(big.exact);
  EXPECT_TRUE(numbers_equal(big, num("98765432109876543210.0")));
}

TEST(NumbersEqual, ExactUnlessADecimalMeetsANonTerminatingFraction) {
  EXPECT_TRUE(numbers_equal(num("0.125"), num("1/8")));
  EXPECT_FALSE(numbers_equal(num("999999"), num("1000000")));
  EXPECT_FALSE(numbers_equal(num("1.0000001"), num("1")));  // both terminating: exact
  EXPECT_TRUE(numbers_equal(num("0.142857142"), num("1/7")));
  EXPECT_FALSE(numbers_equal(num("0.1428"), num("1/7")));
  EXPECT_FALSE(numbers_equal(num("1/3"), num("333333/1000000")));  // fractions: exact
  EXPECT_TRUE(numbers_equal(num("0.33"), num("1/3"), 0.02));       // a looser tolerance is honoured
}

TEST(ScanNumber, ReportsTokenBounds) {
  auto t = scan_number("x -1,500.25% y", 2);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->begin, 2u);
  EXPECT_EQ(t->end, 12u);
  EXPECT_EQ(to_string(t->number), "-6001/4");
  EXPECT_TRUE(t->number.percent);
  EXPECT_FALSE(scan_number("x -1", 0).has_value());
}

TEST(Normalize, StripsLatexAndUnits) {
  EXPECT_EQ(strip_answer_latex("$\\boxed{\\text{\\$12}}$."), "12");
  EXPECT_EQ(strip_answer_latex("\\[ x = \\frac{1}{2} \\]"), "\\frac{1}{2}");
  EXPECT_EQ(strip_answer_latex("<<8=8>>8"), "8");
  EXPECT_EQ(strip_answer_latex("\\left[ 1, 2 \\right]"), "[ 1, 2 ]");
  EXPECT_EQ(strip_answer_latex("a \\rightarrow b"), "a \\rightarrow b");
  NormalizedAnswer n = normalize_answer("18 dollars per hour");
  ASSERT_TRUE(n.number);
  EXPECT_EQ(to_string(*n.number), "18");
  EXPECT_FALSE(normalize_answer("5 m^2").number.has_value());
  EXPECT_EQ(normalize_answer("  New   York ").text, "newyork");
}

TEST(ParseMixedNumber, WholeSpaceProperFraction) {
  auto mixed = [](const std::string& s) {
    auto n = parse_mixed_number(s);
    return n ? to_string(*n) : std::string("none");
  };
  EXPECT_EQ(mixed("3 1/2"), "7/2");
  EXPECT_EQ(mixed(" -3 1/2 "), "-7/2");
  EXPECT_EQ(mixed("2 6/8"), "11/4");
  EXPECT_EQ(mixed("3\\frac{1}{2}"), "7/2");
  EXPECT_EQ(mixed("3 \\dfrac12"), "7/2");
  EXPECT_EQ(mixed("31/2"), "none");     // a plain fraction
  EXPECT_EQ(mixed("3 3/2"), "none");    // improper
  EXPECT_EQ(mixed("3 5"), "none");      // two numbers
  EXPECT_EQ(mixed("3 0.5"), "none");
  EXPECT_EQ(mixed("3 -1/2"), "none");
  EXPECT_EQ(mixed("1,000 1/2"), "none");  // the whole part is plain digits
  EXPECT_EQ(mixed("3 1/2 cups"), "none");
}

TEST(Normalize, DoubledBracesMixedNumbersAndGluedLetters) {
  EXPECT_EQ(strip_answer_latex("\\boxed{{9}}"), "9");
  EXPECT_EQ(strip_answer_latex("{{x+1}}"), "x+1");
  EXPECT_EQ(strip_answer_latex("\\{1,2\\}"), "\\{1,2\\}");  // a set, not a group
  EXPECT_EQ(to_string(*normalize_answer("3 1/2").number), "7/2");
  EXPECT_FALSE(normalize_answer("5x").number.has_value());  // 5·x, not 5 with a unit
  EXPECT_TRUE(normalize_answer("5 m").number.has_value());
  EXPECT_TRUE(normalize_answer("5cm").number.has_value());
  EXPECT_TRUE(normalize_answer("50 %").number->percent);
  EXPECT_EQ(normalize_answer("x = 5").stripped, "x = 5");  // kept whole for math_equivalent
  EXPECT_EQ(normalize_answer("x = 5").text, "5");
}
