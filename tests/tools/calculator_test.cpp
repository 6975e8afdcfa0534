// The calculator tool: exact arithmetic through the math reward's bounded
// parser; what it cannot evaluate is an error result, never a throw.
#include <gtest/gtest.h>

#include "hpcrl/tools/calculator.h"

namespace {

using hpcrl::tools::Calculator;
using hpcrl::tools::CallContext;

TEST(Calculator, AProductOfTwoFourDigitNumbersIsExact) {
  Calculator calc;
  const auto r = calc.call({{"expression", "4821*7396"}}, CallContext{});
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.text, "35656116");  // 4821 · 7396 = 35,656,116
}

TEST(Calculator, AQuotientStaysAnExactFraction) {
  Calculator calc;
  EXPECT_EQ(calc.call("(7-2)/3", CallContext{}).text, "5/3");  // a bare string is the expression too
}

TEST(Calculator, AnIrrationalValueIsADecimalOfTwelveDigits) {
  Calculator calc;
  EXPECT_EQ(calc.call({{"expression", "\\sqrt{2}"}}, CallContext{}).text, "1.41421356237");
}

TEST(Calculator, APowerOverTheBitsBoundIsAnErrorNotAHang) {
  Calculator calc;
  const auto r = calc.call({{"expression", "((2^64)^64)^64"}}, CallContext{});  // 2^262144 > 2^16384 bits
  EXPECT_TRUE(r.error);
  EXPECT_NE(r.text.find("within the limits"), std::string::npos) << r.text;
}

TEST(Calculator, VariablesAndWrongArgumentsAreErrors) {
  Calculator calc;
  EXPECT_NE(calc.call({{"expression", "2x+1"}}, CallContext{}).text.find("has variables"), std::string::npos);
  const auto r = calc.call({{"expr", "1+1"}}, CallContext{});
  EXPECT_TRUE(r.error);
  EXPECT_NE(r.text.find("{\"expression\""), std::string::npos) << r.text;
}

TEST(Calculator, TheSchemaIsAnOpenAiFunction) {
  const auto s = Calculator("calc").schema();
  EXPECT_EQ(s["type"], "function");
  EXPECT_EQ(s["function"]["name"], "calc");
  EXPECT_EQ(s["function"]["parameters"]["required"][0], "expression");
}

}  // namespace
