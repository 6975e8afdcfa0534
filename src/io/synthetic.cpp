// Synthetic column-arithmetic task (format and split rules in synthetic.h).
// Small problem spaces (≤ 2^20 problems, e.g. 2-digit 2-term addition: 8100)
// are enumerated and shuffled, so eval and train partition them exactly;
// larger ones are sampled with rejection of repeats. Both paths draw from the
// platform-independent generator in dataset_rng.h.
#include "hpcrl/io/synthetic.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "dataset_rng.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::io {
namespace {

constexpr uint64_t kEnumerateLimit = uint64_t{1} << 20;

long long ten_to(int k) {
  long long p = 1;
  for (int i = 0; i < k; ++i) p *= 10;
  return p;
}

int digit_count(long long v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// Number of (operands, ops) combinations, saturating at UINT64_MAX.
uint64_t problem_space(const SyntheticConfig& cfg) {
  uint64_t per_operand = static_cast<uint64_t>(9 * ten_to(cfg.digits - 1));
  uint64_t total = 1;
  auto mul = [&](uint64_t f) { total = total > UINT64_MAX / f ? UINT64_MAX : total * f; };
  for (int i = 0; i < cfg.terms; ++i) mul(per_operand);
  for (int i = 1; i < cfg.terms; ++i) mul(cfg.ops.size());
  return total;
}

ArithmeticProblem decode(uint64_t id, const SyntheticConfig& cfg) {
  uint64_t per_operand = static_cast<uint64_t>(9 * ten_to(cfg.digits - 1));
  ArithmeticProblem p;
  for (int i = 0; i < cfg.terms; ++i) {
    p.operands.push_back(ten_to(cfg.digits - 1) + static_cast<long long>(id % per_operand));
    id /= per_operand;
  }
  for (int i = 1; i < cfg.terms; ++i) {
    p.ops.push_back(cfg.ops[id % cfg.ops.size()]);
    id /= cfg.ops.size();
  }
  return p;
}

ArithmeticProblem draw(uint64_t& state, const SyntheticConfig& cfg) {
  ArithmeticProblem p;
  for (int i = 0; i < cfg.terms; ++i) {
    p.operands.push_back(ten_to(cfg.digits - 1) +
                         static_cast<long long>(detail::bounded(state, static_cast<uint64_t>(9 * ten_to(cfg.digits - 1)))));
  }
  for (int i = 1; i < cfg.terms; ++i) p.ops.push_back(cfg.ops[detail::bounded(state, cfg.ops.size())]);
  return p;
}

template <typename T>
void shuffle_in_place(std::vector<T>& v, uint64_t& state) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[detail::bounded(state, i)]);
}

Example to_example(const ArithmeticProblem& p, const SyntheticCalls& calls) {
  Example ex;
  ex.prompt = arithmetic_prompt(p);
  ex.response = p.ops.at(0) == '*' ? product_solution(p, calls, ex.inserted) : arithmetic_solution(p);
  ex.answer = std::to_string(p.result());
  return ex;
}

// Problems for both splits: eval first (so `train` never changes the eval set).
void generate(const SyntheticConfig& cfg, std::vector<ArithmeticProblem>& eval, std::vector<ArithmeticProblem>& train,
              std::string& note) {
  uint64_t space = problem_space(cfg);
  uint64_t state = detail::stream_state(cfg.seed, 0x5EED);
  if (space <= kEnumerateLimit) {
    std::vector<uint64_t> all;  // ids of the problems with a non-negative result
    for (uint64_t id = 0; id < space; ++id) {
      if (decode(id, cfg).result() >= 0) all.push_back(id);
    }
    HPCRL_CHECK_INPUT(all.size() > cfg.eval,
                      "synthetic.eval: " << cfg.eval << " eval problems requested but only " << all.size()
                                         << " distinct problems exist with digits=" << cfg.digits << ", terms="
                                         << cfg.terms << ", ops=\"" << cfg.ops
                                         << "\"; lower eval or raise digits/terms");
    shuffle_in_place(all, state);
    for (size_t i = 0; i < cfg.eval; ++i) eval.push_back(decode(all[i], cfg));
    std::vector<uint64_t> pool(all.begin() + static_cast<long>(cfg.eval), all.end());
    size_t passes = 0;
    while (train.size() < cfg.train) {
      if (passes++ > 0) shuffle_in_place(pool, state);
      size_t take = std::min(pool.size(), cfg.train - train.size());
      for (size_t i = 0; i < take; ++i) train.push_back(decode(pool[i], cfg));
    }
    if (passes > 1) {
      std::ostringstream os;
      os.precision(2);
      os << std::fixed << "train cycles through " << pool.size() << " distinct non-eval problems ("
         << static_cast<double>(cfg.train) / static_cast<double>(pool.size()) << " times each on average)";
      note = os.str();
    }
    return;
  }
  HPCRL_CHECK_INPUT(cfg.train + cfg.eval <= space / 4,
                    "synthetic: train + eval = " << cfg.train + cfg.eval << " is too close to the " << space
                                                 << " possible problems; lower train/eval");
  std::unordered_set<std::string> seen;
  size_t budget = 100 * (cfg.train + cfg.eval) + 1000000;
  auto fill = [&](std::vector<ArithmeticProblem>& out, size_t n) {
    while (out.size() < n) {
      HPCRL_CHECK_INPUT(budget-- > 0, "synthetic: could not draw " << n << " distinct problems with a non-negative "
                                                                   << "result for ops=\"" << cfg.ops
                                                                   << "\"; use fewer terms or include '+' in ops");
      ArithmeticProblem p = draw(state, cfg);
      if (p.result() < 0 || !seen.insert(arithmetic_prompt(p)).second) continue;
      out.push_back(std::move(p));
    }
  };
  fill(eval, cfg.eval);
  fill(train, cfg.train);
}

// Every `every`-th problem of `split` (from position every - 1) replaced by a
// distinct long one (non-negative result), drawn from its own stream.
void lengthen_tail(const SyntheticConfig& cfg, std::vector<ArithmeticProblem>& split, uint64_t& state,
                   std::unordered_set<std::string>& seen) {
  const SyntheticLongTail& lt = cfg.long_tail;
  SyntheticConfig shape = cfg;
  shape.digits = lt.digits;
  shape.terms = lt.terms;
  for (size_t i = lt.every - 1; i < split.size(); i += lt.every) {
    ArithmeticProblem p;
    for (size_t tries = 0;; ++tries) {
      HPCRL_CHECK_INPUT(tries < 1000000, "synthetic.long_tail: could not draw distinct long problems with a "
                                         "non-negative result; include '+' in ops or use more digits");
      p = draw(state, shape);
      if (p.result() >= 0 && seen.insert(arithmetic_prompt(p)).second) break;
    }
    split[i] = std::move(p);
  }
}

}  // namespace

void validate_synthetic(const SyntheticConfig& cfg, const std::string& where) {
  if (cfg.task != "arithmetic") {
    std::string msg = where + ".task: unknown synthetic task '" + cfg.task + "'";
    if (!str::closest(cfg.task, {"arithmetic"}).empty()) msg += " (did you mean 'arithmetic'?)";
    throw InputError(msg + "; the built-in task is 'arithmetic'");
  }
  HPCRL_CHECK_INPUT(cfg.digits >= 1 && cfg.digits <= 9,
                    where << ".digits: " << cfg.digits << " is outside 1..9 (digits per operand)");
  HPCRL_CHECK_INPUT(cfg.terms >= 2 && cfg.terms <= 6, where << ".terms: " << cfg.terms << " is outside 2..6");
  HPCRL_CHECK_INPUT(cfg.ops == "+" || cfg.ops == "-" || cfg.ops == "+-" || cfg.ops == "-+" || cfg.ops == "*",
                    where << ".ops: \"" << cfg.ops << "\" is not one of \"+\", \"-\", \"+-\", \"*\"");
  HPCRL_CHECK_INPUT(cfg.ops != "*" || (cfg.terms == 2 && cfg.digits <= 4),
                    where << ": products (ops \"*\") have terms: 2 and digits 1..4");
  HPCRL_CHECK_INPUT(!cfg.calls.enabled() || cfg.ops == "*", where << ".calls: calculator calls are for ops \"*\"");
  HPCRL_CHECK_INPUT(cfg.train >= 1, where << ".train: must be at least 1");
  const SyntheticLongTail& lt = cfg.long_tail;
  if (lt.every == 0) return;
  HPCRL_CHECK_INPUT(lt.every >= 2, where << ".long_tail.every: " << lt.every
                                         << " would make every problem long; use 2 or more (10: one in ten)");
  HPCRL_CHECK_INPUT(lt.digits >= 1 && lt.digits <= 15,
                    where << ".long_tail.digits: " << lt.digits << " is outside 1..15 (sums must fit in 64 bits)");
  HPCRL_CHECK_INPUT(lt.terms >= 2 && lt.terms <= 6, where << ".long_tail.terms: " << lt.terms << " is outside 2..6");
}

long long ArithmeticProblem::result() const {
  long long r = operands.at(0);
  for (size_t i = 1; i < operands.size(); ++i) {
    const char op = ops.at(i - 1);
    r = op == '*' ? r * operands[i] : op == '-' ? r - operands[i] : r + operands[i];
  }
  return r;
}

std::string product_solution(const ArithmeticProblem& p, const SyntheticCalls& calls,
                             std::vector<std::pair<size_t, size_t>>& inserted) {
  const std::string answer = std::to_string(p.result());
  if (!calls.enabled()) return "\\boxed{" + answer + "}";
  std::string prompt = arithmetic_prompt(p);
  std::string s = calls.open + prompt.substr(0, prompt.size() - 1) + calls.close;
  const size_t reply = s.size();
  s += calls.reply_open + answer + calls.reply_close;
  inserted.emplace_back(reply, s.size());
  return s + "\\boxed{" + answer + "}";
}

std::string arithmetic_prompt(const ArithmeticProblem& p) {
  std::string s = std::to_string(p.operands.at(0));
  for (size_t i = 1; i < p.operands.size(); ++i) s += p.ops.at(i - 1) + std::to_string(p.operands[i]);
  return s + "=";
}

std::string arithmetic_solution(const ArithmeticProblem& p) {
  int columns = 0;
  for (long long v : p.operands) columns = std::max(columns, digit_count(v));
  std::string steps, low_digits;  // low_digits: answer digits, least significant first
  std::string leading;
  long long carry = 0;
  for (int col = 0; col < columns; ++col) {
    std::string step;
    long long total = 0;
    for (size_t i = 0; i < p.operands.size(); ++i) {
      long long d = (p.operands[i] / ten_to(col)) % 10;
      bool minus = i > 0 && p.ops[i - 1] == '-';
      if (i > 0) step += minus ? '-' : '+';
      step += static_cast<char>('0' + d);
      total += minus ? -d : d;
    }
    if (carry > 0) step += "+" + std::to_string(carry);
    if (carry < 0) step += "-" + std::to_string(-carry);
    total += carry;
    step += "=" + std::to_string(total);
    if (col == columns - 1) {
      HPCRL_CHECK(total >= 0, "negative leading column in " << arithmetic_prompt(p));
      leading = std::to_string(total);
    } else if (total >= 0) {
      low_digits += static_cast<char>('0' + total % 10);
      carry = total / 10;
    } else {
      long long borrow = (-total + 9) / 10;
      long long d = total + 10 * borrow;
      step += "+" + std::to_string(10 * borrow) + "=" + std::to_string(d);
      low_digits += static_cast<char>('0' + d);
      carry = -borrow;
    }
    steps += step + ";";
  }
  std::string answer = leading + std::string(low_digits.rbegin(), low_digits.rend());
  size_t nz = answer.find_first_not_of('0');
  answer = nz == std::string::npos ? "0" : answer.substr(nz);
  HPCRL_CHECK(answer == std::to_string(p.result()),
              "worked solution of " << arithmetic_prompt(p) << " reads " << answer << ", expected " << p.result());
  return steps + "\\boxed{" + answer + "}";
}

SyntheticSplits make_synthetic(const SyntheticConfig& cfg) {
  validate_synthetic(cfg, "synthetic");
  std::vector<ArithmeticProblem> eval, train;
  std::string note;
  generate(cfg, eval, train, note);
  if (cfg.long_tail.every > 0) {
    uint64_t state = detail::stream_state(cfg.seed, 0x1046);
    std::unordered_set<std::string> seen;
    lengthen_tail(cfg, eval, state, seen);  // eval first: train never changes the eval set
    lengthen_tail(cfg, train, state, seen);
  }
  SyntheticSplits out;
  auto fill = [&](Dataset& ds, const std::vector<ArithmeticProblem>& problems, const char* split) {
    ds.name = "synthetic:arithmetic/" + std::string(split);
    for (const auto& p : problems) ds.examples.push_back(to_example(p, cfg.calls));
    ds.report.rows = ds.report.kept = ds.examples.size();
  };
  fill(out.train, train, "train");
  fill(out.eval, eval, "eval");
  out.train.report.note = note;
  spdlog::info("dataset {} (digits={}, terms={}, ops=\"{}\", seed={}): {}", out.train.name, cfg.digits, cfg.terms,
               cfg.ops, cfg.seed, out.train.report.summary());
  spdlog::info("dataset {}: {} distinct problems, none in train", out.eval.name, out.eval.size());
  return out;
}

}  // namespace hpcrl::io
