// Expression builders with size estimates (math_build.h). The estimates:
//   bits   at a sample point (variables at most kVariableBits), a bound on the
//          exact value's size: products add, powers multiply, sums take their
//          largest term (only powers grow faster than the input, which
//          max_bytes/max_nodes bound);
//   terms  the number of monomials a full expansion would have: sums add,
//          products multiply, (t terms)^n gives C(t+n-1, n).
#include "math_build.h"

#include <algorithm>
#include <cmath>

namespace hpcrl::reward::detail {
namespace {

double bit_length(const GiNaC::numeric& n) {
  GiNaC::numeric a = GiNaC::abs(n);
  if (a.is_integer()) return 1.0 + static_cast<double>(a.int_length());
  return 1.0 + static_cast<double>(a.numer().int_length() + a.denom().int_length());
}

// C(t + n - 1, n): how many monomials (sum of t terms)^n expands to, capped.
double multichoose(double t, long n) {
  double r = 1.0;
  for (long i = 1; i <= n && r < 1e300; ++i) r = r * (t + static_cast<double>(i) - 1.0) / static_cast<double>(i);
  return std::max(r, 1.0);
}

ParsedExpr leaf(GiNaC::ex value, double bits, bool plain) {
  ParsedExpr p;
  p.value = std::move(value);
  p.bits = bits;
  p.plain = plain;
  return p;
}


// 2^x, e^{2x}: never expanded (2^{x+1000} would expand to 2^1000·2^x) and
// compared in floating point at sample points, where an exact power could be
// as large as the exponent's value. `bits` bounds log2 of both |v| and |1/v|
// for each operand, so |base^exponent| < 2^(base.bits · 2^exponent.bits).
ParsedExpr symbolic_power(GiNaC::ex value, const ParsedExpr& base, const ParsedExpr& exponent) {
  if (exponent.bits > kMaxSymbolicExponentBits) math_fail();
  double bits = base.bits * std::pow(2.0, exponent.bits);
  if (!(bits <= kMaxFloatBits)) math_fail();
  ParsedExpr r = leaf(std::move(value), bits, false);
  r.terms = base.terms;
  r.symbolic_denominator = base.symbolic_denominator || has_symbol(exponent.value);
  r.symbolic_exponent = true;
  return r;
}

}  // namespace

bool has_symbol(const GiNaC::ex& e) {
  for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it) {
    if (GiNaC::is_a<GiNaC::symbol>(*it)) return true;
  }
  return false;
}

double bits_cap(const ParsedExpr& e, const MathLimits& limits) {
  return e.symbolic_exponent ? kMaxFloatBits : limits.max_bits;
}

ParsedExpr number_expr(const GiNaC::numeric& value) { return leaf(value, bit_length(value), true); }
ParsedExpr constant_expr(const GiNaC::ex& value) { return leaf(value, kConstantBits, false); }
ParsedExpr variable_expr(const GiNaC::symbol& s) { return leaf(s, kVariableBits, true); }

ParsedExpr add_expr(const ParsedExpr& a, const ParsedExpr& b, bool subtract) {
  double bits = std::max(a.bits, b.bits) + 1.0;
  ParsedExpr r = leaf(subtract ? a.value - b.value : a.value + b.value, bits, a.plain && b.plain);
  r.terms = a.terms + b.terms;
  r.symbolic_denominator = a.symbolic_denominator || b.symbolic_denominator;
  r.symbolic_exponent = a.symbolic_exponent || b.symbolic_exponent;
  return r;
}

ParsedExpr multiply_expr(const ParsedExpr& a, const ParsedExpr& b, bool divide) {
  if (divide && b.value.is_zero()) math_fail();
  ParsedExpr r = leaf(divide ? a.value / b.value : a.value * b.value, a.bits + b.bits, a.plain && b.plain);
  r.terms = a.terms * b.terms;
  r.symbolic_denominator = a.symbolic_denominator || b.symbolic_denominator || (divide && has_symbol(b.value));
  r.symbolic_exponent = a.symbolic_exponent || b.symbolic_exponent;
  return r;
}

ParsedExpr power_expr(const ParsedExpr& base, const ParsedExpr& exponent, const MathLimits& limits) {
  const bool numeric_exponent =
      GiNaC::is_a<GiNaC::numeric>(exponent.value) && exponent.value.info(GiNaC::info_flags::rational);
  if (!numeric_exponent) {
    // e^{x} as exp(x), so that it evaluates like the constant e it raises.
    bool base_e = base.value.is_equal(GiNaC::exp(GiNaC::ex(1)));
    ParsedExpr r = symbolic_power(base_e ? GiNaC::exp(exponent.value) : GiNaC::pow(base.value, exponent.value),
                                  base, exponent);
    return r;
  }
  GiNaC::numeric n = GiNaC::ex_to<GiNaC::numeric>(exponent.value);
  GiNaC::numeric p = GiNaC::abs(n.numer()), q = n.denom();
  // A rational number's integer power is bounded by the result's bits alone
  // (2^{100} is fine); anything else by max_exponent, since it may expand.
  bool number_base = n.is_integer() && base.value.info(GiNaC::info_flags::rational);
  if ((!number_base && p > limits.max_exponent) || p > limits.max_bits || q > limits.max_exponent) math_fail();
  if (base.value.is_zero() && n.is_negative()) math_fail();
  double bits = base.bits * p.to_double() / q.to_double() + 1.0;
  if (!(bits <= bits_cap(base, limits))) math_fail();  // before GiNaC evaluates a number's power
  ParsedExpr r = leaf(GiNaC::pow(base.value, n), bits, base.plain && n.is_integer());
  r.terms = multichoose(base.terms, static_cast<long>(p.to_double()));
  r.symbolic_denominator = base.symbolic_denominator || (n.is_negative() && has_symbol(base.value));
  r.symbolic_exponent = base.symbolic_exponent || exponent.symbolic_exponent;
  return r;
}

ParsedExpr root_expr(const ParsedExpr& base, const GiNaC::numeric& n, const MathLimits& limits) {
  if (!n.is_pos_integer() || n < 2 || n > limits.max_exponent) math_fail();
  GiNaC::ex value;
  if (GiNaC::is_a<GiNaC::numeric>(base.value) && GiNaC::ex_to<GiNaC::numeric>(base.value).is_negative() &&
      n.is_odd()) {
    value = -GiNaC::pow(-base.value, GiNaC::numeric(1) / n);
  } else {
    value = GiNaC::pow(base.value, GiNaC::numeric(1) / n);
  }
  ParsedExpr r = leaf(value, base.bits / n.to_double() + 1.0, false);
  r.terms = base.terms;
  r.symbolic_denominator = base.symbolic_denominator;
  r.symbolic_exponent = base.symbolic_exponent;
  return r;
}

}  // namespace hpcrl::reward::detail
