// Symbolic equivalence of two final answers, the slow path behind
// answers_equivalent (answer_normalize.h) for competition-style answers:
// 2^{3} = 8, 2\sqrt{2} = \sqrt{8}, \frac{1}{\sqrt{2}} = \frac{\sqrt2}{2},
// x^2+2x+1 = (x+1)^2, \{1,2,3\} = \{3,2,1\}, 25\% = 0.25.
// It works on text that strip_answer_latex already cleaned; both sides are
// first split into structure, then scalars are compared with GiNaC.
//
// Identical text is equal at once. Otherwise, structure (the same kind on both
// sides, or not equivalent; separators count only outside (), [], {}, \{ \}):
//   equation  one '=' (two or more: not equivalent). `x = 3` against a
//             non-equation compares `3` (a bare variable, optionally
//             subscripted, on either side: `3 = x` too). Two equations with the
//             same bare variable on the left compare their right sides; any
//             other two are equal when (l1 - r1) - (l2 - r2) = 0 or
//             (l1 - r1) + (l2 - r2) = 0 (so `y = 2x+1` = `2x+1 = y` =
//             `y - 2x = 1`, but `2y = 4x+2` != `y = 2x+1`: no scaling).
//   union     A \cup B: parts order-free.
//   set       \{a, b\}: members order-free, duplicates ignored; also equal to
//             the bare list `a, b`. \emptyset, \varnothing and \{\} are the
//             empty set.
//   interval / tuple  (a, b], [a, b), (a, b), [a, b]: bracket kinds must match,
//             members compared in order; ±\infty (or ∞) equals only itself.
//   bare list a, b, c: order-free ("all solutions"); a comma in a thousands
//             group ("1,234") does not split one (inside brackets every comma
//             splits: "(100,200)" is a pair).
//   scalar    anything else: trailing unit words ("5 cm", "2\sqrt{2} meters")
//             are dropped, then math_expr.h parses it.
// Scalars a, b:
//   - neither has a variable: two rationals are equal only exactly (0.333 !=
//     1/3, 1000000 != 1000001); with a radical, π or e on either side, when the
//     values agree to rel_tol (1e-9, relative; or closer than 1e-30) in
//     40-digit floating point (\sqrt{2} != 1.414, \pi = 3.14159265358979);
//   - with variables: expand(a - b) (normal() too for rational functions) is 0 →
//     equal; with rational coefficients that verdict is final. Otherwise —
//     radicals, π, a symbolic exponent, or an expansion estimated above
//     max_expand_terms ((a+b+c+d)^{64}) — the two are evaluated at three fixed
//     rational points (exactly while the values stay rational) and must agree
//     at all of them.
// Percent: if either side has '%', the comparison is tried with '%' meaning
// 1/100 and then with the '%' dropped, so 25\% = 0.25 and 25\% = 25.
//
// Bounds (MathLimits): max_bytes per answer (longer: not equivalent), the parse
// bounds of math_expr.h for each scalar, max_elements members per collection,
// structure nested at most 4 deep, and a wall-clock budget (time_budget, 50 ms)
// checked between steps: once it is spent the answer is "not equivalent". GiNaC
// is not thread-safe, so calls are serialised by one mutex. Never throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace hpcrl::reward {

// Bounds of one comparison; the defaults are the reward's. Parse bounds are
// explained in math_expr.h.
struct MathLimits {
  size_t max_bytes = 400;     // per answer text
  int max_depth = 32;         // nesting: each group, \frac, \sqrt and leading sign is a level
  int max_nodes = 400;        // numbers, letters and operations in one expression
  // |n| of an integer exponent (except on a rational number: 2^{100} is bounded
  // by max_bits alone), |p| and q of a p/q exponent, a root's index.
  int max_exponent = 64;
  double max_bits = 16384.0;  // bound on the estimated bit size of a value (2^16384)
  // Expressions whose full expansion is estimated above this many terms are
  // never expanded; they are compared at sample points instead.
  double max_expand_terms = 2000.0;
  int max_elements = 32;      // members of one set, tuple or list
  double rel_tol = 1e-9;      // for values that are not rational (radicals, π, e)
  std::chrono::milliseconds time_budget{50};  // whole comparison; over it: not equivalent
};

bool math_equivalent(const std::string& a, const std::string& b, const MathLimits& limits = {});

}  // namespace hpcrl::reward
