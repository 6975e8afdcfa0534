// Jinja's built-in tests, `x is name(args)` (builtins.h), with Jinja 3.1's
// semantics: e.g. a str is iterable and a sequence, a bool is a number, and
// the default Undefined is iterable.
#include <map>

#include "io/jinja/builtins.h"
#include "io/jinja/failure.h"

namespace hpcrl::io::jinja {
namespace {

using Kind = Value::Kind;
using TestFn = bool (*)(const Value&, const CallArgs&);

Value arg0(const CallArgs& a) { return a.args.empty() ? Value() : a.args[0]; }

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Dict; }},
      {"iterable", [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.kind() == Kind::Dict;
       }},
      {"sequence", [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.kind() == Kind::Dict;
       }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Int; }},
      {"float", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Float; }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Bool; }},
      {"true", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Bool && v.as_bool(); }},
      {"false", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Bool && !v.as_bool(); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.kind() == Kind::Callable; }},
      {"odd", [](const Value& v, const CallArgs&) { return v.is_number() && v.as_int() % 2 != 0; }},
      {"even", [](const Value& v, const CallArgs&) { return v.is_number() && v.as_int() % 2 == 0; }},
      {"divisibleby", [](const Value& v, const CallArgs& a) {
         int64_t d = arg0(a).as_int();
         if (d == 0) fail("ZeroDivisionError: divisibleby 0");
         return v.as_int() % d == 0;
       }},
      {"equalto", [](const Value& v, const CallArgs& a) { return v.equals(arg0(a)); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !v.equals(arg0(a)); }},
      {"lt", [](const Value& v, const CallArgs& a) { return binary_op("<", v, arg0(a)).truthy(); }},
      {"le", [](const Value& v, const CallArgs& a) { return binary_op("<=", v, arg0(a)).truthy(); }},
      {"gt", [](const Value& v, const CallArgs& a) { return binary_op(">", v, arg0(a)).truthy(); }},
      {"ge", [](const Value& v, const CallArgs& a) { return binary_op(">=", v, arg0(a)).truthy(); }},
      {"in", [](const Value& v, const CallArgs& a) { return binary_op("in", v, arg0(a)).truthy(); }},
      {"sameas", [](const Value& v, const CallArgs& a) {
         const Value b = arg0(a);
         return v.kind() == b.kind() && (v.kind() == Kind::None || v.kind() == Kind::Undefined || v.equals(b));
       }},
  };
  return table;
}

const char* alias(const std::string& name) {
  if (name == "eq" || name == "==") return "equalto";
  if (name == "!=") return "ne";
  if (name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == ">") return "gt";
  if (name == ">=") return "ge";
  if (name == "lessthan") return "lt";
  if (name == "greaterthan") return "gt";
  return nullptr;
}

}  // namespace

bool is_known_test(const std::string& name) { return tests().count(name) || alias(name); }

bool apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  const char* a = alias(name);
  auto it = tests().find(a ? std::string(a) : name);
  if (it == tests().end()) fail("no test named '" + name + "'");
  return it->second(value, args);
}

}  // namespace hpcrl::io::jinja
