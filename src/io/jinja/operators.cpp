// Jinja's binary operators with Python's semantics (builtins.h).
#include <cmath>

#include "io/jinja/builtins.h"
#include "io/jinja/failure.h"
#include "io/jinja/text.h"

namespace hpcrl::io::jinja {
namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError: unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  bool ints = a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float;
  if (op == "/") {
    if (b.as_double() == 0) fail("ZeroDivisionError: division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if ((op == "//" || op == "%") && b.as_double() == 0) fail("ZeroDivisionError: integer division or modulo by zero");
  if (ints) {
    int64_t x = a.as_int(), y = b.as_int();
    if (op == "+") return Value::integer(x + y);
    if (op == "-") return Value::integer(x - y);
    if (op == "*") return Value::integer(x * y);
    if (op == "//") return Value::integer(floor_div(x, y));
    if (op == "%") return Value::integer(x - floor_div(x, y) * y);
    if (op == "**" && y >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= x;
      return Value::integer(r);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "//") return Value::number(std::floor(x / y));
  if (op == "%") return Value::number(x - std::floor(x / y) * y);
  return Value::number(std::pow(x, y));
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(out);
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(out);
}

// Python ordering for <, >, <=, >=: numbers, strings, lists.
int compare(const Value& a, const Value& b, const std::string& op) {
  if (a.is_number() && b.is_number()) {
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!x[i].equals(y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("TypeError: '" + op + "' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& item, const Value& container) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) fail("TypeError: 'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const auto& e : container.as_list())
        if (e.equals(item)) return true;
      return false;
    case Value::Kind::Dict: case Value::Kind::Namespace:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default: fail("TypeError: argument of type '" + container.type_name() + "' is not iterable");
  }
}

}  // namespace

void undefined_error(const Value& u) {
  fail("UndefinedError: " + (u.as_string().empty() ? std::string("a value is undefined") : u.as_string()));
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(a.str() + b.str());
  if (op == "==") return Value::boolean(a.equals(b));
  if (op == "!=") return Value::boolean(!a.equals(b));
  if (op == "in") return Value::boolean(contains(a, b));
  if (op == "not in") return Value::boolean(!contains(a, b));
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "<") return Value::boolean(compare(a, b, op) < 0);
  if (op == ">") return Value::boolean(compare(a, b, op) > 0);
  if (op == "<=") return Value::boolean(compare(a, b, op) <= 0);
  if (op == ">=") return Value::boolean(compare(a, b, op) >= 0);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(out);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.kind() == Value::Kind::Int) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && a.kind() == Value::Kind::Int) return repeat(b, a.as_int());
  type_error(op, a, b);
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t c : text::decode(v.as_string())) chars.push_back(Value::string(text::encode(std::u32string(1, c))));
      return chars;
    }
    default: fail("TypeError: '" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace hpcrl::io::jinja
