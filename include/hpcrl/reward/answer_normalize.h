// Turning an extracted answer (or a gold answer) into something comparable.
// Models write the same value many ways — "$1,200.00", "1200 dollars",
// "\boxed{\text{1200}}", "\$1{,}200", "x = 1200" — and a reward that misses
// them teaches the policy formatting instead of arithmetic. Normalisation:
//   1. strip LaTeX that carries no value: math delimiters ($…$, \(…\), \[…\]),
//      a whole \boxed{…}/\fbox{…}, a redundant outer group ("{9}" from
//      \boxed{{9}}), \text{…}-like wrappers (kept: their content), spacing
//      (\! \, \; \: \quad ~), \left/\right, degree marks, GSM8K calculator
//      annotations <<…>>, '$' and leading €/£/¥, "x = " prefixes, a trailing
//      sentence period;
//   2. if what is left is a mixed number ("3 1/2", "3\frac{1}{2}") or ONE number
//      (answer_number.h grammar) optionally followed by unit words ("18
//      dollars", "5 cm", "50%"), it is numeric; one letter glued to the number
//      ("5x") is a variable, not a unit, so "5x" is not numeric;
//   3. otherwise it is compared as text: ASCII lower-case, whitespace removed.
// Equivalence (answers_equivalent), first the fast path: numeric vs numeric by
// numbers_equal — two plain numbers (no '%') are decided there, exactly — and
// equal canonical text. When that says no, the step-1 text of both goes to
// math_equivalent (math_equivalence.h): symbolic equality of expressions
// (2^{3} = 8, 2\sqrt{2} = \sqrt{8}), sets, intervals, tuples, equations, and a
// percentage's second reading (25% = 0.25).
#pragma once

#include <optional>
#include <string>

#include "hpcrl/reward/answer_number.h"

namespace hpcrl::reward {

struct NormalizedAnswer {
  std::string text;              // canonical text (step 3), also set for numbers
  std::string stripped;          // step 1's result, trimmed (input of math_equivalent)
  std::optional<Number> number;  // set when the answer is numeric (step 2)
};

// Step 1 only (exposed for tests and for `hpcrl eval --json` diagnostics).
std::string strip_answer_latex(const std::string& raw);

NormalizedAnswer normalize_answer(const std::string& raw);

bool answers_equivalent(const NormalizedAnswer& a, const NormalizedAnswer& b, double rel_tol = 1e-6);
bool answers_equivalent(const std::string& a, const std::string& b, double rel_tol = 1e-6);

}  // namespace hpcrl::reward
