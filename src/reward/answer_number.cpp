// Number scanning and exact/tolerant comparison for verifiable rewards (see
// answer_number.h for the grammar and the equality rule). Arithmetic runs in
// __int128 so that a reduced value that fits int64 is always found exactly;
// anything larger keeps only its double value.
#include "hpcrl/reward/answer_number.h"

#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "answer_braces.h"

namespace hpcrl::reward {
namespace {

using i128 = __int128;
using detail::is_digit;
using detail::is_space;

// Mantissas longer than this are not tracked exactly (10^36 < 2^127).
constexpr size_t kMaxExactDigits = 36;

i128 abs128(i128 x) { return x < 0 ? -x : x; }

i128 gcd128(i128 a, i128 b) {
  a = abs128(a);
  b = abs128(b);
  while (b != 0) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// 10^k as i128, or 0 when it would not stay below 10^36.
i128 pow10_128(long k) {
  if (k < 0 || k > static_cast<long>(kMaxExactDigits)) return 0;
  i128 p = 1;
  for (long i = 0; i < k; ++i) p *= 10;
  return p;
}

// An unreduced rational; `exact` false once anything overflowed.
struct Rational {
  i128 num = 0;
  i128 den = 1;
  bool exact = true;
  double value = 0.0;
};

Number finish(Rational r, bool decimal, bool percent) {
  Number n;
  n.decimal = decimal;
  n.percent = percent;
  n.value = r.value;
  if (r.exact && r.den != 0) {
    if (r.den < 0) {
      r.num = -r.num;
      r.den = -r.den;
    }
    i128 g = gcd128(r.num, r.den);
    if (g > 1) {
      r.num /= g;
      r.den /= g;
    }
    if (abs128(r.num) <= LLONG_MAX && r.den <= LLONG_MAX) {
      n.exact = true;
      n.num = static_cast<long long>(r.num);
      n.den = static_cast<long long>(r.den);
      n.value = static_cast<double>(static_cast<long double>(n.num) / static_cast<long double>(n.den));
    }
  }
  return n;
}

// The digits of a decimal's mantissa, separators dropped: integer then fractional digits.
struct Mantissa {
  std::string digits;
  size_t int_len = 0, frac_len = 0;
};

// Digits with optional ",ddd" groups and ".ddd" at `q`; moves `q` past them.
Mantissa scan_mantissa(const std::string& s, size_t& q) {
  Mantissa m;
  while (q < s.size() && is_digit(s[q])) m.digits += s[q++];
  m.int_len = m.digits.size();
  // Thousands groups: only after a 1-3 digit lead, each exactly three digits.
  if (m.int_len >= 1 && m.int_len <= 3) {
    while (q + 3 < s.size() && s[q] == ',' && is_digit(s[q + 1]) && is_digit(s[q + 2]) &&
           is_digit(s[q + 3]) && (q + 4 >= s.size() || !is_digit(s[q + 4]))) {
      m.digits.append(s, q + 1, 3);
      q += 4;
    }
    m.int_len = m.digits.size();
  }
  if (q + 1 < s.size() && s[q] == '.' && is_digit(s[q + 1])) {
    ++q;
    while (q < s.size() && is_digit(s[q])) {
      m.digits += s[q++];
      ++m.frac_len;
    }
  }
  return m;
}

// An exponent ("e5", "E-3") at `q`: sets `exponent` and moves `q` past it. False (q unchanged) when there is none.
bool scan_exponent(const std::string& s, size_t& q, long& exponent) {
  if (q >= s.size() || (s[q] != 'e' && s[q] != 'E')) return false;
  size_t e = q + 1;
  bool neg = false;
  if (e < s.size() && (s[e] == '+' || s[e] == '-')) neg = s[e++] == '-';
  if (e >= s.size() || !is_digit(s[e])) return false;
  long v = 0;
  while (e < s.size() && is_digit(s[e])) {
    if (v < 100000) v = v * 10 + (s[e] - '0');
    ++e;
  }
  exponent = neg ? -v : v;
  q = e;
  return true;
}

// The value of mantissa × 10^exponent: exact while it fits, always as a double.
Rational decimal_value(const Mantissa& m, long exponent) {
  Rational r;
  const std::string& digits = m.digits;
  std::string plain = digits.substr(0, m.int_len) + "." + digits.substr(m.int_len) + "e" + std::to_string(exponent);
  r.value = std::strtod(plain.c_str(), nullptr);
  size_t first_nonzero = digits.find_first_not_of('0');
  std::string significant = first_nonzero == std::string::npos ? "0" : digits.substr(first_nonzero);
  if (significant.size() > kMaxExactDigits) {
    r.exact = false;
    return r;
  }
  for (char c : significant) r.num = r.num * 10 + (c - '0');
  long scale = static_cast<long>(m.frac_len) - exponent;  // value = num / 10^scale
  i128 p = pow10_128(scale < 0 ? -scale : scale);
  if (p == 0) {
    r.exact = r.num == 0;  // 0e999 is still exactly zero
    return r;
  }
  if (scale >= 0) {
    r.den = p;
  } else if (r.num <= (static_cast<i128>(1) << 120) / p) {
    r.num *= p;
  } else {
    r.exact = false;
  }
  return r;
}

// Unsigned decimal at `pos`: digits with optional ",ddd" groups, ".ddd",
// exponent. Sets `end` and `decimal`. No sign, no fraction bar.
std::optional<Rational> scan_decimal(const std::string& s, size_t pos, size_t& end, bool& decimal) {
  size_t q = pos;
  const Mantissa m = scan_mantissa(s, q);
  if (m.digits.empty()) return std::nullopt;
  long exponent = 0;
  const bool has_exp = scan_exponent(s, q, exponent);
  end = q;
  decimal = m.frac_len > 0 || has_exp;
  return decimal_value(m, exponent);
}

// A signed plain number for inside \frac{A}{B}: the whole string must be one.
std::optional<Rational> parse_frac_part(const std::string& part, bool& decimal) {
  auto tok = parse_number(part);
  if (!tok) return std::nullopt;
  decimal = decimal || tok->decimal;
  Rational r;
  r.value = tok->value;
  r.exact = tok->exact;
  r.num = tok->num;
  r.den = tok->den;
  return r;
}

Rational divide(const Rational& a, const Rational& b) {
  Rational r;
  r.value = a.value / b.value;
  r.exact = a.exact && b.exact;
  if (r.exact) {
    // Operands are reduced int64-range values here, so the products fit i128.
    r.num = a.num * b.den;
    r.den = a.den * b.num;
  }
  return r;
}

// \frac{A}{B}, \dfrac, \tfrac, or the shorthand \frac12 at `pos`.
std::optional<Rational> scan_latex_frac(const std::string& s, size_t pos, size_t& end, bool& decimal) {
  size_t q = pos;
  for (const char* cmd : {"\\frac", "\\dfrac", "\\tfrac"}) {
    std::string c(cmd);
    if (s.compare(q, c.size(), c) == 0) {
      q += c.size();
      break;
    }
  }
  if (q == pos) return std::nullopt;
  while (q < s.size() && is_space(s[q])) ++q;
  std::string parts[2];
  for (auto& part : parts) {
    while (q < s.size() && is_space(s[q])) ++q;
    if (q >= s.size()) return std::nullopt;
    if (s[q] == '{') {
      size_t close = detail::brace_group_end(s, q);
      if (close == std::string::npos) return std::nullopt;
      part = s.substr(q + 1, close - q - 1);
      q = close + 1;
    } else if (is_digit(s[q])) {
      part = s.substr(q, 1);  // \frac12: each argument is one token (digit)
      ++q;
    } else {
      return std::nullopt;
    }
  }
  auto a = parse_frac_part(parts[0], decimal);
  auto b = parse_frac_part(parts[1], decimal);
  if (!a || !b || b->value == 0.0) return std::nullopt;
  end = q;
  return divide(*a, *b);
}

bool terminating(long long den) {
  while (den % 2 == 0) den /= 2;
  while (den % 5 == 0) den /= 5;
  return den == 1;
}

}  // namespace

std::optional<NumberToken> scan_number(const std::string& s, size_t pos) {
  size_t q = pos;
  bool negative = false;
  if (q < s.size() && (s[q] == '-' || s[q] == '+')) negative = s[q++] == '-';
  bool decimal = false;
  size_t end = q;
  std::optional<Rational> r;
  if (q < s.size() && s[q] == '\\') {
    r = scan_latex_frac(s, q, end, decimal);
  } else if (q < s.size() && (is_digit(s[q]) || (s[q] == '.' && q + 1 < s.size() && is_digit(s[q + 1])))) {
    r = scan_decimal(s, q, end, decimal);
    // "a/b": the denominator is another unsigned decimal.
    if (r && end + 1 < s.size() && s[end] == '/' && (is_digit(s[end + 1]) || s[end + 1] == '.')) {
      size_t den_end = end + 1;
      bool den_decimal = false;
      auto den = scan_decimal(s, end + 1, den_end, den_decimal);
      if (den) {
        if (den->value == 0.0) return std::nullopt;
        Rational a = *r, b = *den;
        Number na = finish(a, false, false), nb = finish(b, false, false);
        Rational ra{na.num, na.den, na.exact, na.value}, rb{nb.num, nb.den, nb.exact, nb.value};
        r = divide(ra, rb);
        decimal = decimal || den_decimal;
        end = den_end;
      }
    }
  }
  if (!r) return std::nullopt;
  bool percent = false;
  if (end < s.size() && s[end] == '%') {
    percent = true;
    ++end;
  }
  if (negative) {
    r->num = -r->num;
    r->value = -r->value;
  }
  NumberToken tok;
  tok.begin = pos;
  tok.end = end;
  tok.number = finish(*r, decimal, percent);
  return tok;
}

std::optional<Number> parse_number(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  if (b == e) return std::nullopt;
  std::string t = s.substr(b, e - b);
  auto tok = scan_number(t, 0);
  if (!tok || tok->end != t.size()) return std::nullopt;
  return tok->number;
}

std::optional<Number> parse_mixed_number(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  std::string t = s.substr(b, e - b);
  size_t q = 0;
  bool negative = false;
  if (q < t.size() && (t[q] == '-' || t[q] == '+')) negative = t[q++] == '-';
  size_t whole_begin = q;
  while (q < t.size() && is_digit(t[q])) ++q;
  // At most 18 digits: whole * den + a below stays inside int64 checks below.
  if (q == whole_begin || q - whole_begin > 18) return std::nullopt;
  long long whole = std::stoll(t.substr(whole_begin, q - whole_begin));
  size_t frac = q;
  while (frac < t.size() && is_space(t[frac])) ++frac;
  bool latex = t.compare(frac, 1, "\\") == 0;
  // "3 1/2" needs the space; "31/2" is a plain fraction.
  if (frac >= t.size() || (!latex && (frac == q || !is_digit(t[frac])))) return std::nullopt;
  auto tok = scan_number(t, frac);
  if (!tok || tok->end != t.size()) return std::nullopt;
  const Number& f = tok->number;
  if (!f.exact || f.decimal || f.percent || f.num <= 0 || f.num >= f.den) return std::nullopt;
  if (!latex && t.find('/', frac) == std::string::npos) return std::nullopt;
  if (whole > (LLONG_MAX - f.num) / f.den) return std::nullopt;
  Number n;
  n.exact = true;
  n.den = f.den;
  n.num = (whole * f.den + f.num) * (negative ? -1 : 1);
  n.value = static_cast<double>(n.num) / static_cast<double>(n.den);
  return n;
}

bool numbers_equal(const Number& a, const Number& b, double rel_tol) {
  if (a.exact && b.exact) {
    if (a.num == b.num && a.den == b.den) return true;
    // Tolerance only where a decimal cannot be exact: against a value with no
    // terminating decimal expansion.
    bool tolerant = (a.decimal && !terminating(b.den)) || (b.decimal && !terminating(a.den));
    if (!tolerant) return false;
  }
  if (a.value == b.value) return true;
  if (!std::isfinite(a.value) || !std::isfinite(b.value)) return false;
  double scale = std::max(std::fabs(a.value), std::fabs(b.value));
  return std::fabs(a.value - b.value) <= rel_tol * scale;
}

std::string to_string(const Number& n) {
  std::ostringstream os;
  if (n.exact) {
    os << n.num;
    if (n.den != 1) os << "/" << n.den;
  } else {
    os.precision(17);
    os << n.value << " (inexact)";
  }
  return os.str();
}

}  // namespace hpcrl::reward
