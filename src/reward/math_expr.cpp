// The bounded answer-expression parser (grammar and bounds in math_expr.h).
// Scannerless recursive descent over the bytes, because LaTeX's one-token
// arguments (\frac12, \sqrt2) are about characters, not tokens. Every failure
// — syntax, a bound, a zero denominator, anything GiNaC throws while building —
// is an internal exception caught once at the top, so a caller only ever sees
// nullopt.
#include "hpcrl/reward/math_expr.h"

#include <exception>

#include "answer_braces.h"
#include "hpcrl/reward/answer_number.h"
#include "math_build.h"

namespace hpcrl::reward {
namespace {

using detail::is_alpha;
using detail::is_digit;
using detail::is_space;
using detail::math_fail;

class Parser {
 public:
  Parser(const std::string& s, SymbolTable& symbols, const ExprOptions& options)
      : s_(s), symbols_(symbols), opt_(options) {}

  ParsedExpr run() {
    ParsedExpr v = parse_sum();
    skip_ws();
    if (pos_ != s_.size()) math_fail();
    return v;
  }

 private:
  // ---- bounds ---------------------------------------------------------------
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > p_.opt_.limits.max_depth) math_fail();
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  ParsedExpr count(ParsedExpr v) {
    if (++nodes_ > opt_.limits.max_nodes || !(v.bits <= detail::bits_cap(v, opt_.limits))) math_fail();
    return v;
  }

  // ---- lexical helpers ------------------------------------------------------
  // True (and consumed) when the command `name` (without '\') starts at pos_
  // as a whole command, not the prefix of a longer one.
  bool take_command(const char* name) {
    std::string c = std::string("\\") + name;
    if (s_.compare(pos_, c.size(), c) != 0) return false;
    size_t after = pos_ + c.size();
    if (is_alpha(c.back()) && after < s_.size() && is_alpha(s_[after])) return false;
    pos_ = after;
    return true;
  }

  bool take_bytes(const char* bytes) {
    std::string b(bytes);
    if (s_.compare(pos_, b.size(), b) != 0) return false;
    pos_ += b.size();
    return true;
  }

  // Whitespace and LaTeX that only sets spacing or sizes: never a value.
  void skip_ws() {
    static const char* kSpacing[] = {"quad", "qquad", "left", "right", "displaystyle", "big", "Big",
                                     "bigl", "bigr", "Bigl", "Bigr", ",", "!", ";", ":", " "};
    for (bool again = true; again;) {
      again = false;
      while (pos_ < s_.size() && (is_space(s_[pos_]) || s_[pos_] == '~')) ++pos_;
      for (const char* c : kSpacing) {
        if (take_command(c)) again = true;
      }
    }
  }

  bool at(char c) {
    skip_ws();
    return pos_ < s_.size() && s_[pos_] == c;
  }

  void expect(char c) {
    if (!at(c)) math_fail();
    ++pos_;
  }

  // A command that starts a primary (may follow another factor implicitly).
  bool at_primary_command() const {
    for (const char* c : {"\\frac", "\\dfrac", "\\tfrac", "\\cfrac", "\\sqrt", "\\pi"}) {
      std::string cmd(c);
      size_t after = pos_ + cmd.size();
      if (s_.compare(pos_, cmd.size(), cmd) == 0 && (after >= s_.size() || !is_alpha(s_[after]))) return true;
    }
    return s_.compare(pos_, 2, "\xCF\x80") == 0;  // π
  }

  bool at_implicit_factor() {
    skip_ws();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    return is_alpha(c) || c == '(' || c == '{' || c == '[' || (c == '\\' && at_primary_command()) ||
           s_.compare(pos_, 2, "\xCF\x80") == 0;
  }

  // ---- grammar ----------------------------------------------------------------
  ParsedExpr parse_sum() {
    ParsedExpr v = parse_product();
    for (;;) {
      if (at('+')) {
        ++pos_;
        v = count(detail::add_expr(v, parse_product(), false));
      } else if (at('-')) {
        ++pos_;
        v = count(detail::add_expr(v, parse_product(), true));
      } else {
        return v;
      }
    }
  }

  // 0: none, 1: multiply, 2: divide (consumed).
  int take_product_operator() {
    skip_ws();
    if (take_bytes("*") || take_command("cdot") || take_command("times") || take_bytes("\xC3\x97") ||
        take_bytes("\xC2\xB7")) {  // × ·
      return 1;
    }
    if (take_bytes("/") || take_command("div") || take_bytes("\xC3\xB7")) return 2;  // ÷
    return 0;
  }

  ParsedExpr parse_product() {
    ParsedExpr v = parse_unary();
    for (;;) {
      int op = take_product_operator();
      if (op != 0) {
        v = count(detail::multiply_expr(v, parse_unary(), op == 2));
      } else if (at_implicit_factor()) {
        v = count(detail::multiply_expr(v, parse_power(), false));
      } else {
        return v;
      }
    }
  }

  // Each sign and each primary is one level of nesting (DepthGuard): a group
  // passes through parse_primary once, so depth counts groups and sign chains.
  ParsedExpr parse_unary() {
    if (at('-')) {
      ++pos_;
      DepthGuard guard(*this);
      ParsedExpr v = parse_unary();
      v.value = -v.value;
      return count(v);
    }
    if (at('+')) {
      ++pos_;
      DepthGuard guard(*this);
      return parse_unary();
    }
    return parse_power();
  }

  ParsedExpr parse_power() {
    ParsedExpr base = parse_postfix();
    if (!at('^')) return base;
    ++pos_;
    ParsedExpr exponent = at('{') ? parse_group('{', '}') : parse_unary();
    return count(detail::power_expr(base, exponent, opt_.limits));
  }

  ParsedExpr parse_postfix() {
    ParsedExpr v = parse_primary();
    skip_ws();
    if (take_bytes("%") || take_bytes("\\%")) {
      v.value = v.value * opt_.percent_scale;
      v.bits += 8.0;
      v = count(v);
    }
    if (at('!')) math_fail();  // factorials are not evaluated (10000! would not be bounded)
    return v;
  }

  ParsedExpr parse_group(char open, char close) {
    expect(open);
    ParsedExpr v = parse_sum();
    expect(close);
    return v;
  }

  ParsedExpr parse_primary() {
    DepthGuard guard(*this);
    skip_ws();
    if (pos_ >= s_.size()) math_fail();
    char c = s_[pos_];
    if (is_digit(c) || (c == '.' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]))) return parse_number();
    if (is_alpha(c)) return parse_letter();
    if (c == '(') return parse_group('(', ')');
    if (c == '[') return parse_group('[', ']');
    if (c == '{') return parse_group('{', '}');
    if (take_bytes("\xCF\x80") || take_command("pi")) {
      return count(detail::constant_expr(GiNaC::Pi));
    }
    if (take_command("frac") || take_command("dfrac") || take_command("tfrac") || take_command("cfrac")) {
      ParsedExpr num = parse_argument();
      ParsedExpr den = parse_argument();
      return count(detail::multiply_expr(num, den, true));
    }
    if (take_command("sqrt")) return parse_sqrt();
    math_fail();
  }

  ParsedExpr parse_sqrt() {
    GiNaC::numeric index = 2;
    if (at('[')) {
      ParsedExpr n = parse_group('[', ']');
      if (!GiNaC::is_a<GiNaC::numeric>(n.value)) math_fail();
      index = GiNaC::ex_to<GiNaC::numeric>(n.value);
    }
    return count(detail::root_expr(parse_argument(), index, opt_.limits));
  }

  // A LaTeX argument: a {group}, or one digit or letter, or one command (\frac\pi2).
  ParsedExpr parse_argument() {
    skip_ws();
    if (pos_ >= s_.size()) math_fail();
    char c = s_[pos_];
    if (c == '{') return parse_group('{', '}');
    if (is_digit(c)) {
      ++pos_;
      return count(detail::number_expr(GiNaC::numeric(c - '0')));
    }
    if (is_alpha(c) || c == '\\') return parse_primary();
    math_fail();
  }

  std::string digit_run() {
    size_t b = pos_;
    while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    return s_.substr(b, pos_ - b);
  }

  static GiNaC::numeric integer_of(const std::string& digits) {
    size_t nz = digits.find_first_not_of('0');
    if (nz == std::string::npos) return 0;
    return GiNaC::numeric(digits.substr(nz).c_str());
  }

  ParsedExpr parse_number() {
    std::string digits;
    size_t grouped = thousands_group_end(s_, pos_);
    for (; pos_ < grouped; ++pos_) {
      if (s_[pos_] != ',') digits += s_[pos_];
    }
    digits += digit_run();
    long frac_len = 0;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      ++pos_;
      std::string frac = digit_run();
      frac_len = static_cast<long>(frac.size());
      digits += frac;
    }
    long exponent = scientific_exponent();
    GiNaC::numeric value = integer_of(digits) * GiNaC::pow(GiNaC::numeric(10), GiNaC::numeric(exponent - frac_len));
    return count(detail::number_expr(value));
  }

  // "e3", "E-4" right after a number's digits; 0 when there is none.
  long scientific_exponent() {
    if (pos_ >= s_.size() || (s_[pos_] != 'e' && s_[pos_] != 'E')) return 0;
    size_t q = pos_ + 1;
    bool negative = false;
    if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) negative = s_[q++] == '-';
    if (q >= s_.size() || !is_digit(s_[q])) return 0;  // "2e" is 2·e
    pos_ = q;
    std::string digits = digit_run();
    if (digits.size() > 4) math_fail();
    long v = std::stol(digits);
    if (v > 1000) math_fail();
    return negative ? -v : v;
  }

  ParsedExpr parse_letter() {
    size_t b = pos_++;
    if (pos_ < s_.size() && is_alpha(s_[pos_])) math_fail();  // a word, not a product of letters
    std::string name(1, s_[b]);
    if (pos_ < s_.size() && s_[pos_] == '_') name += subscript();
    if (name == "e") {
      return count(detail::constant_expr(GiNaC::exp(GiNaC::ex(1))));
    }
    return count(detail::variable_expr(symbols_.get(name)));
  }

  // "_1", "_n", "_{12}" after a letter: part of the variable's name.
  std::string subscript() {
    ++pos_;  // '_'
    size_t b = pos_;
    if (pos_ < s_.size() && s_[pos_] == '{') {
      size_t close = detail::brace_group_end(s_, pos_);
      if (close == std::string::npos || close == pos_ + 1) math_fail();
      for (size_t i = pos_ + 1; i < close; ++i) {
        if (!is_alpha(s_[i]) && !is_digit(s_[i])) math_fail();
      }
      pos_ = close + 1;
      return "_" + s_.substr(b + 1, close - b - 1);
    }
    if (pos_ < s_.size() && (is_alpha(s_[pos_]) || is_digit(s_[pos_]))) return "_" + s_.substr(pos_++, 1);
    math_fail();
  }

  const std::string& s_;
  SymbolTable& symbols_;
  const ExprOptions& opt_;
  size_t pos_ = 0;
  int depth_ = 0;
  int nodes_ = 0;
};

ParsedExpr from_number(const Number& n) {
  return detail::number_expr(GiNaC::numeric(n.num) / GiNaC::numeric(n.den));
}

}  // namespace

const GiNaC::symbol& SymbolTable::get(const std::string& name) {
  auto it = symbols_.find(name);
  if (it == symbols_.end()) it = symbols_.emplace(name, GiNaC::symbol(name)).first;
  return it->second;
}

size_t thousands_group_end(const std::string& s, size_t pos) {
  size_t q = pos;
  while (q < s.size() && is_digit(s[q])) ++q;
  if (q - pos < 1 || q - pos > 3) return pos;
  size_t end = pos;
  while (q + 3 < s.size() && s[q] == ',' && is_digit(s[q + 1]) && is_digit(s[q + 2]) && is_digit(s[q + 3]) &&
         (q + 4 >= s.size() || !is_digit(s[q + 4]))) {
    q += 4;
    end = q;
  }
  return end;
}

std::optional<ParsedExpr> parse_math_expr(const std::string& text, SymbolTable& symbols,
                                          const ExprOptions& options) {
  if (text.size() > options.limits.max_bytes) return std::nullopt;
  try {
    if (auto mixed = parse_mixed_number(text)) return from_number(*mixed);
    return Parser(text, symbols, options).run();
  } catch (const detail::MathBoundExceeded&) {
    return std::nullopt;
  } catch (const std::exception&) {  // GiNaC: division by zero, overflow, …
    return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace hpcrl::reward
