// Numbers as they appear in final answers: "1,234", "-0.50", ".5", "3/4",
// "\frac{3}{4}", "\frac12", "1.5e3", "50%". A verifiable reward must say 72 ==
// 72.0 == 72.00 and 1/2 == 0.5 but 1000000 != 1000001, so numbers are kept as
// exact rationals (int64 numerator/denominator, reduced) whenever they fit,
// with a double beside them for the rare value that does not fit.
//
// Equality rule (numbers_equal): two exact values compare exactly. A relative
// tolerance (default 1e-6) is used only where exactness is impossible: when one
// side is a written decimal and the other a fraction with no terminating
// decimal expansion (0.3333333 vs 1/3), or when a value overflowed int64.
// So "1000000.5" vs "1000000" is wrong, "0.6666667" vs "\frac{2}{3}" is right.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace hpcrl::reward {

struct Number {
  long long num = 0;     // exact value num/den when `exact` (den > 0, gcd(num, den) = 1)
  long long den = 1;
  bool exact = false;    // false: the value overflowed int64, only `value` is meaningful
  double value = 0.0;    // always set
  bool decimal = false;  // written with a decimal point or an exponent ("0.5", "1e3")
  bool percent = false;  // written with a trailing % (the value is NOT divided by 100)
};

// A number token found in text: the bytes [begin, end) and its value.
struct NumberToken {
  size_t begin = 0;
  size_t end = 0;
  Number number;
};

// Reads one number starting exactly at `pos`: optional sign, then either
// \frac{A}{B} / \frac12 (\dfrac, \tfrac too) or digits with optional
// thousands groups (",ddd"), decimal part, exponent and "/B" fraction, then an
// optional '%'. Returns nullopt when no number starts at `pos`, or on a zero
// denominator.
std::optional<NumberToken> scan_number(const std::string& s, size_t pos);

// The whole of `s` (surrounding whitespace ignored) as one number, else nullopt.
std::optional<Number> parse_number(const std::string& s);

// A mixed number, the whole of `s`: an optional sign, a whole number (plain
// digits), then a proper fraction a/b (0 < a < b, integers) written either
// after a space ("3 1/2") or as \frac right after it ("3\frac{1}{2}",
// "3 \dfrac12"). "-3 1/2" is -7/2. Anything else ("3 5", "3 3/2", "3 0.5/1",
// "3/4") is nullopt, so a list of numbers never reads as one.
std::optional<Number> parse_mixed_number(const std::string& s);

// Exact when possible, otherwise relative tolerance `rel_tol` (see the rule above).
bool numbers_equal(const Number& a, const Number& b, double rel_tol = 1e-6);

// "3/4", "-7", "1.25 (inexact)" — for messages and tests.
std::string to_string(const Number& n);

}  // namespace hpcrl::reward
