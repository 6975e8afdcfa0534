// The built-in reasoning task of the quickstart: multi-term column arithmetic
// with a worked solution that writes out every column, least-significant
// first, with its carry or borrow, then the answer in \boxed{}:
//   prompt   "47+85="
//   response "7+5=12;4+8+1=13;\boxed{132}"
//   answer   "132"
// Each step is one column: that column's digits (with the problem's signs),
// plus the carry from the previous step ("+1"; a borrow is "-1"), "=" the
// column total. A negative total is brought into range on the spot
// ("2-8=-6+10=4", then "-1" is carried). The last character of every step but
// the last is a digit of the answer, and the last step's total is the
// answer's leading part, so the boxed answer is read back from the steps:
// total of the last step, then the other steps' last digits in reverse.
// The model does local work (add a handful of digits) instead of recalling a
// whole sum — that is what makes the task a reasoning task and learnable by a
// tiny model (docs/results.md).
//
// YAML: `synthetic: {task: arithmetic, digits: 2, terms: 2, ops: "+", train: 20000, eval: 500}`
// (seed: the run seed unless given). Difficulty: digits per operand (exactly
// that many, leading digit non-zero), terms per problem, ops "+", "-" or "+-"
// (subtraction problems are drawn only with a non-negative result);
// `long_tail: {every: 10, digits: 12, terms: 6}` makes one problem in ten a
// long one (SyntheticLongTail).
// Splits: eval problems are distinct and never appear in train. When train
// asks for more problems than exist (2-digit addition has 8100), train
// cycles through all non-eval problems, reshuffled each pass, and the report
// says so. Everything is a pure function of the config.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/io/dataset.h"

namespace hpcrl::io {

// A long-tailed workload: every `every`-th problem of each split (positions
// every-1, 2·every-1, ...) is drawn with `digits` and `terms` instead, so its
// worked solution is several times the others' (12 digits × 6 terms beside the
// quickstart's 2 × 2: ~9× the median, tests/data/synthetic_test.cpp).
struct SyntheticLongTail {
  size_t every = 0;        // 0 = off; else ≥ 2
  int digits = 12;         // 1..15 (every sum fits in 64 bits)
  int terms = 6;           // 2..6
};

// Products' worked solutions with a calculator call: "<calc>482*739</calc>" +
// "<result>356198</result>" (inserted, not trained) + "\boxed{356198}".
struct SyntheticCalls {
  std::string open, close, reply_open, reply_close;
  bool enabled() const { return !open.empty(); }
};

struct SyntheticConfig {
  std::string task = "arithmetic";
  int digits = 2;          // 1..9
  int terms = 2;           // 2..6
  std::string ops = "+";   // "+", "-" or "+-"
  size_t train = 20000;    // ≥ 1
  size_t eval = 500;       // ≥ 0
  uint64_t seed = 1;
  SyntheticLongTail long_tail;
  SyntheticCalls calls;    // ops "*" only
};

// InputError naming `where` + ".digits" etc. and the valid range.
void validate_synthetic(const SyntheticConfig& cfg, const std::string& where);

struct ArithmeticProblem {
  std::vector<long long> operands;  // [terms], all positive
  std::vector<char> ops;            // [terms - 1]: ops[i] is '+' or '-' before operands[i + 1]
  long long result() const;
};

std::string arithmetic_prompt(const ArithmeticProblem& p);    // "47+85="
std::string arithmetic_solution(const ArithmeticProblem& p);  // "7+5=12;4+8+1=13;\boxed{132}"
// A product's target: "\boxed{N}", or with `calls` the call, its reply (its
// byte range in `inserted`) and the boxed answer.
std::string product_solution(const ArithmeticProblem& p, const SyntheticCalls& calls,
                             std::vector<std::pair<size_t, size_t>>& inserted);

struct SyntheticSplits {
  Dataset train;
  Dataset eval;
};

// Validates (where = "synthetic"), then generates both splits.
SyntheticSplits make_synthetic(const SyntheticConfig& cfg);

}  // namespace hpcrl::io
