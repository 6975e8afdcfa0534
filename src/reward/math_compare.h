// Equality of two parsed scalar answers with GiNaC (the rules are listed in
// include/hpcrl/reward/math_equivalence.h, "Scalars"). Private to the reward
// module: math_equivalence.cpp splits answers into structure and calls this for
// each pair of scalars.
#pragma once

#include <chrono>

#include "hpcrl/reward/math_expr.h"

namespace hpcrl::reward::detail {

// A wall-clock limit for one math_equivalent call. GiNaC calls cannot be
// interrupted, so the size bounds keep each step short and this is checked
// between steps.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds budget) : end_(std::chrono::steady_clock::now() + budget) {}
  bool expired() const { return std::chrono::steady_clock::now() >= end_; }

 private:
  std::chrono::steady_clock::time_point end_;
};

bool scalars_equal(const ParsedExpr& a, const ParsedExpr& b, const SymbolTable& symbols, const MathLimits& limits,
                   const Deadline& deadline);

}  // namespace hpcrl::reward::detail
