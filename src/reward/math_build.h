// Building GiNaC expressions for the answer parser (math_expr.cpp) while
// keeping the estimates a ParsedExpr carries (bits, terms, flags) and the
// bounds that keep every step cheap. Private to the reward module. Each
// builder throws MathBoundExceeded instead of building something too large;
// parse_math_expr catches it.
#pragma once

#include "hpcrl/reward/math_expr.h"

namespace hpcrl::reward::detail {

struct MathBoundExceeded {};

[[noreturn]] inline void math_fail() { throw MathBoundExceeded{}; }

// A variable is replaced by a rational of at most this many bits when values
// are sampled (math_compare.cpp keeps its sample points inside this).
constexpr double kVariableBits = 10.0;
constexpr double kConstantBits = 2.0;  // π, e: irrational, evaluated in floating point

// Expressions with a symbolic exponent are only evaluated in floating point,
// where a value's size is its exponent: 2^26 bits is far inside CLN's range.
// Their exponents stay below 2^kMaxSymbolicExponentBits, so exp/log never need
// a huge argument reduction (2^{2^{7^{12}}} would).
constexpr double kMaxFloatBits = 67108864.0;  // 2^26
constexpr double kMaxSymbolicExponentBits = 24.0;

// The bits bound that applies to `e` (max_bits, or kMaxFloatBits for a
// floating-point-only expression).
double bits_cap(const ParsedExpr& e, const MathLimits& limits);

bool has_symbol(const GiNaC::ex& e);

ParsedExpr number_expr(const GiNaC::numeric& value);
ParsedExpr constant_expr(const GiNaC::ex& value);  // π, e
ParsedExpr variable_expr(const GiNaC::symbol& s);

// a ± b, a · b, a / b (a zero divisor fails).
ParsedExpr add_expr(const ParsedExpr& a, const ParsedExpr& b, bool subtract);
ParsedExpr multiply_expr(const ParsedExpr& a, const ParsedExpr& b, bool divide);

// base^exponent: a rational exponent p/q needs |p|, q <= max_exponent (an
// integer power of a rational number only the bits bound), and the estimated
// result within max_bits before GiNaC computes it. A symbolic exponent (2^x) is
// kept as written and flagged; e^{x} becomes exp(x).
ParsedExpr power_expr(const ParsedExpr& base, const ParsedExpr& exponent, const MathLimits& limits);

// \sqrt[n]{base}, 2 <= n <= max_exponent; an odd root of a negative number is
// the real one (\sqrt[3]{-8} = -2).
ParsedExpr root_expr(const ParsedExpr& base, const GiNaC::numeric& n, const MathLimits& limits);

}  // namespace hpcrl::reward::detail
