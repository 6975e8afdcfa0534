// Scalar equality for math_equivalent. Three methods, cheapest and most
// decisive first:
//   exact      a - b is 0 after GiNaC's automatic evaluation; and for two
//              rationals that is the whole answer (no tolerance: 0.333 != 1/3);
//   symbolic   expand (and normal() where a variable is under a division):
//              canonical for polynomials and rational functions with rational
//              coefficients, so its "no" is final for those; skipped when the
//              expansion is estimated too large, since (a+b+c+d)^64 would not
//              finish (with radicals: above 64 terms, and never normal());
//   sampled    values at fixed rational points, exactly where both stay
//              rational, else in 40-digit floating point to rel_tol — for
//              radicals and π, which expand/normal do not canonicalise
//              (2\sqrt{2} - \sqrt{8} stays as written), and for big expansions.
// Each GiNaC step is bounded by the parser's limits; the deadline is checked
// between steps.
#include "math_compare.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "math_build.h"

namespace hpcrl::reward::detail {
namespace {

bool is_rational(const GiNaC::ex& e) { return e.info(GiNaC::info_flags::rational); }

// |a - b| <= rel_tol * max(|a|, |b|), in floating point. The absolute floor
// catches exact cancellations that leave rounding noise (\sqrt2\sqrt3 - \sqrt6
// evaluates to ~1e-40, not 0); 1e-30 is far below any written answer.
bool values_close(const GiNaC::ex& a, const GiNaC::ex& b, double rel_tol) {
  GiNaC::ex ea = a.evalf(), eb = b.evalf();
  if (!GiNaC::is_a<GiNaC::numeric>(ea) || !GiNaC::is_a<GiNaC::numeric>(eb)) return false;
  GiNaC::numeric na = GiNaC::ex_to<GiNaC::numeric>(ea), nb = GiNaC::ex_to<GiNaC::numeric>(eb);
  GiNaC::numeric diff = GiNaC::abs(na - nb);
  GiNaC::numeric scale = std::max(GiNaC::abs(na), GiNaC::abs(nb));
  return diff <= GiNaC::numeric(rel_tol) * scale || diff <= GiNaC::numeric(1e-30);
}

// Sample values for variables: mixed signs, no integers (so that x^(1/2) and
// 2^x stay irrational, never accidentally exact), numerator and denominator
// below 32 so that each is within kVariableBits (math_build.h).
const int kSamples[][2] = {{13, 7},  {-5, 11}, {17, 19}, {23, 9}, {-29, 13}, {3, 17},
                           {31, 6},  {-7, 5},  {11, 4},  {19, 23}, {-27, 10}, {29, 15}};
constexpr int kSampleCount = sizeof(kSamples) / sizeof(kSamples[0]);
constexpr int kPointsNeeded = 3;
constexpr int kPointsTried = 6;  // a point where either side has a pole is skipped
constexpr double kMaxRadicalExpandTerms = 64.0;

// `floating`: the values as 40-digit floats, for expressions with a symbolic
// exponent, whose exact value at a rational point could be huge (2^{1000x}).
GiNaC::exmap sample_point(const SymbolTable& symbols, int k, bool floating) {
  GiNaC::exmap m;
  int j = 0;
  for (const auto& entry : symbols.all()) {
    // 7 is coprime to 12: within one point, variables get distinct values.
    const int* v = kSamples[(5 * k + 7 * j++) % kSampleCount];
    GiNaC::numeric value(v[0], v[1]);
    m[entry.second] = floating ? GiNaC::ex(value.evalf()) : GiNaC::ex(value);
  }
  return m;
}

bool sampled_equal(const ParsedExpr& a, const ParsedExpr& b, const SymbolTable& symbols, const MathLimits& limits,
                   const Deadline& deadline) {
  int agreed = 0;
  for (int k = 0; k < kPointsTried && agreed < kPointsNeeded; ++k) {
    if (deadline.expired()) return false;
    GiNaC::exmap point = sample_point(symbols, k, a.symbolic_exponent || b.symbolic_exponent);
    GiNaC::ex av, bv;
    try {
      av = a.value.subs(point);
      bv = b.value.subs(point);
    } catch (const std::exception&) {  // a pole at this point (division by zero)
      continue;
    }
    bool same = is_rational(av) && is_rational(bv) ? (av - bv).is_zero() : values_close(av, bv, limits.rel_tol);
    if (!same) return false;
    ++agreed;
  }
  return agreed == kPointsNeeded;
}

// nullopt: undecided (not canonical here, or too large to expand).
std::optional<bool> symbolic_equal(const ParsedExpr& a, const ParsedExpr& b, const GiNaC::ex& diff,
                                   const MathLimits& limits, const Deadline& deadline) {
  // With radicals or π in the coefficients GiNaC's expand is much slower per
  // term and not decisive anyway, so only small ones are tried.
  const bool plain = a.plain && b.plain;
  const double max_terms = plain ? limits.max_expand_terms : kMaxRadicalExpandTerms;
  if (a.terms + b.terms > max_terms || a.symbolic_exponent || b.symbolic_exponent) return std::nullopt;
  GiNaC::ex z = diff.expand();
  if (z.is_zero()) return true;
  if (!plain) return std::nullopt;  // radicals: expand is not canonical, sample
  // normal() only for rational coefficients: with radicals its gcds can take
  // seconds, and sampling decides those anyway.
  if (a.symbolic_denominator || b.symbolic_denominator) {
    if (deadline.expired()) return false;
    return diff.normal().is_zero();
  }
  return false;
}

}  // namespace

bool scalars_equal(const ParsedExpr& a, const ParsedExpr& b, const SymbolTable& symbols, const MathLimits& limits,
                   const Deadline& deadline) {
  if (deadline.expired()) return false;
  try {
    GiNaC::ex diff = a.value - b.value;
    if (diff.is_zero()) return true;
    if (!has_symbol(a.value) && !has_symbol(b.value)) {
      if (a.plain && b.plain) return false;  // two different rationals
      return values_close(a.value, b.value, limits.rel_tol);
    }
    if (auto decided = symbolic_equal(a, b, diff, limits, deadline)) return *decided;
    return sampled_equal(a, b, symbols, limits, deadline);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace hpcrl::reward::detail
