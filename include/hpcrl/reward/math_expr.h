// A bounded parser from one answer's (already LaTeX-stripped) text to a GiNaC
// expression, for symbolic answer equivalence (math_equivalence.h). It reads
// one scalar — no '=', no top-level commas, no sets or intervals; those are
// split off before this is called.
//
// Grammar (precedence low → high):
//   sum      := product (('+' | '-') product)*
//   product  := unary (('*' | '\cdot' | '\times' | '/' | '\div') unary | implicit)*
//   implicit := a factor written right after another with no operator: it must
//               start with a letter, '(', '{', '[', or a command (\frac, \sqrt,
//               \pi): `2x`, `2\pi`, `3\sqrt{2}`, `(x+1)(x-1)`. A digit never
//               starts one, so "12 5" and "1 000" do not parse (no silent product).
//   unary    := ('-' | '+') unary | power             (-x^2 is -(x^2))
//   power    := postfix ['^' (group | unary)]          (right associative; a bare
//               digit run is the whole exponent: `2^10` = 1024)
//   postfix  := primary ['%']                          (times percent_scale)
//   primary  := number | letter | (…) | {…} | […] | \frac A B (\dfrac \tfrac
//               \cfrac; A and B a {group} or a single digit/letter: \frac12)
//               | \sqrt A | \sqrt[n]{A} | \pi | π
// Numbers are exact rationals: `0.25` is 1/4, `1,234` is 1234 (thousands groups
// as answer_number.h reads them), `1.5e3` is 1500 (a digit, then e/E, then an
// optionally signed digit: scientific notation, never e·3).
// Letters: `e` alone is Euler's number (exp(1)); every other single ASCII
// letter is a variable (`i` too — no imaginary unit), case-sensitive, with an
// optional subscript (`x_1`, `a_{12}`). A run of two or more letters ("cm",
// "xy", "sin") does not parse: it is a word, not a product. A whole input of
// the form `W a/b` or `W\frac{a}{b}` (whole number, proper fraction) is the
// mixed number W + a/b (answer_number.h, parse_mixed_number).
// Odd roots of negative numbers are real: \sqrt[3]{-8} = -2.
//
// Bounds (MathLimits, math_equivalence.h) so that a hostile or huge answer cannot hang a reward
// call: input bytes, nesting depth, node count, |integer exponent|, root index,
// and an estimate of the bit size of any value the expression can take at a
// small rational point (`bits`, checked before a power is built, so
// ((2^{64})^{64})^{64} fails without being computed); exceeding one is a parse
// failure. A symbolic exponent (2^x, e^{2x}, 2^{\sqrt2}) is kept as written and
// flagged: such expressions are compared in floating point only, with a
// looser size bound, and the exponent must stay small (below 2^24 at a sample
// point, so 2^{2^{x}} and 2^{7^{61/5}} fail). Factorials are not accepted.
// Nothing here expands a power.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include <ginac/ginac.h>

#include "hpcrl/reward/math_equivalence.h"  // MathLimits

namespace hpcrl::reward {

// Variables by name, shared by the two sides of a comparison so that `x` on
// one side is the same GiNaC symbol as `x` on the other.
class SymbolTable {
 public:
  const GiNaC::symbol& get(const std::string& name);
  const std::map<std::string, GiNaC::symbol>& all() const { return symbols_; }

 private:
  std::map<std::string, GiNaC::symbol> symbols_;
};

// A parsed expression with the estimates the comparison uses to choose a method.
struct ParsedExpr {
  GiNaC::ex value;
  double bits = 0.0;    // estimated bit size at a small rational point (see above)
  double terms = 1.0;   // estimated number of terms when fully expanded
  bool plain = true;    // only rationals, variables and integer powers (a rational function)
  bool symbolic_denominator = false;  // a variable appears under a division or a negative power
  bool symbolic_exponent = false;     // a power with a non-numeric exponent (2^x, e^{2x}, 2^{\pi})
};

struct ExprOptions {
  MathLimits limits;
  GiNaC::numeric percent_scale{1, 100};  // value of a trailing '%': 1/100, or 1 to drop it
};

// Parses all of `text`; nullopt on a syntax error, an exceeded bound, a zero
// denominator or anything GiNaC rejects. Never throws.
std::optional<ParsedExpr> parse_math_expr(const std::string& text, SymbolTable& symbols,
                                          const ExprOptions& options = {});

// For a digit at `pos` that starts a number: the end of its integer part when
// that is written with thousands groups ("1,234,567": a 1–3 digit lead, then
// ",ddd" groups), else `pos` itself (no groups there). Shared with the
// structure splitter so that "1,234" is one number and not a list.
size_t thousands_group_end(const std::string& s, size_t pos);

}  // namespace hpcrl::reward
