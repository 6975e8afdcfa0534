// Jinja's built-in filters, tests, operators and the Python methods of str
// and dict that HF chat templates use. Failures are jinja::Failure.
#pragma once

#include <string>

#include "io/jinja/value.h"

namespace hpcrl::io::jinja {

class Evaluator;

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

// `value | name(args)`.
Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
// `value is name(args)`.
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);
// `a op b` for arithmetic, comparison, `in`, `not in` and `~` (not and/or).
Value binary_op(const std::string& op, const Value& a, const Value& b);
// obj.name(args) for str and dict methods; false when `obj` has no such method.
bool call_method(const Value& obj, const std::string& name, const CallArgs& args, Value* result);
// The error for using an Undefined where a value is needed.
[[noreturn]] void undefined_error(const Value& undefined);
// Python iteration: list items, dict keys, str characters; Undefined is empty.
List iterate(const Value& v);

}  // namespace hpcrl::io::jinja
