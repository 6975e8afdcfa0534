// Expressions of the Jinja evaluator (evaluator.h): names, literals,
// attribute/item/slice access, calls, filters, tests and operators. A failure
// is placed at the innermost node being evaluated.
#include "io/jinja/builtins.h"
#include "io/jinja/evaluator.h"
#include "io/jinja/failure.h"
#include "io/jinja/text.h"

namespace hpcrl::io::jinja {

Value Evaluator::eval(const Expr& e) {
  step(e.line, e.column);
  try {
    return eval_node(e);
  } catch (Failure& f) {
    if (f.line == 0) {
      f.line = e.line;
      f.column = e.column;
    }
    throw;
  }
}

Value Evaluator::eval_node(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: return lookup(e.name);
    case Expr::Kind::List: {
      List items;
      for (const auto& x : e.items) items.push_back(eval(*x));
      return Value::list(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        if (!k.is_string()) fail("dict keys must be strings here, got " + k.type_name());
        d.set(k.as_string(), eval(*e.items[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::Attr: return get_attr(eval(*e.items[0]), e.name);
    case Expr::Kind::Item: {
      Value obj = eval(*e.items[0]);
      return get_item(obj, eval(*e.items[1]));
    }
    case Expr::Kind::Slice: return get_slice(eval(*e.items[0]), e);
    case Expr::Kind::Call: return eval_call(e);
    case Expr::Kind::Filter: {
      Value v = eval(*e.items[0]);
      return apply_filter(e.name, v, eval_args(e, 1));
    }
    case Expr::Kind::Test: {
      Value v = eval(*e.items[0]);
      return Value::boolean(apply_test(e.name, v, eval_args(e, 1)) != e.negated);
    }
    case Expr::Kind::Unary: {
      Value v = eval(*e.items[0]);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) fail("TypeError: bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v;
      return v.kind() == Value::Kind::Float ? Value::number(-v.as_double()) : Value::integer(-v.as_int());
    }
    case Expr::Kind::Binary: {
      Value a = eval(*e.items[0]);
      if (e.name == "and") return a.truthy() ? eval(*e.items[1]) : a;
      if (e.name == "or") return a.truthy() ? a : eval(*e.items[1]);
      return binary_op(e.name, a, eval(*e.items[1]));
    }
    case Expr::Kind::Cond:
      if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
      return e.items[2] ? eval(*e.items[2]) : Value::undefined("the condition of an `if` without `else` was false");
  }
  fail("unknown expression");
}

CallArgs Evaluator::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.items.size(); ++i) args.args.push_back(eval(*e.items[i]));
  for (const auto& [k, v] : e.kwargs) args.kwargs.emplace_back(k, eval(*v));
  return args;
}

Value Evaluator::eval_call(const Expr& e) {
  const Expr& callee = *e.items[0];
  if (callee.kind == Expr::Kind::Attr) {  // obj.method(...)
    Value obj = eval(*callee.items[0]);
    if (obj.is_undefined()) undefined_error(obj);
    Value result;
    CallArgs args = eval_args(e, 1);
    if (call_method(obj, callee.name, args, &result)) return result;
    Value fn = get_attr(obj, callee.name);
    if (fn.kind() != Value::Kind::Callable)
      fail("'" + obj.type_name() + "' object has no method '" + callee.name + "'");
    return fn.function()(args);
  }
  Value fn = eval(callee);
  if (fn.is_undefined()) undefined_error(fn);
  if (fn.kind() != Value::Kind::Callable) fail("'" + fn.type_name() + "' object is not callable");
  CallArgs args = eval_args(e, 1);
  return fn.function()(args);
}

Value Evaluator::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_mapping()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

namespace {
// Python index normalisation: negative counts from the end; nullopt when out of range.
std::optional<size_t> index_of(int64_t i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  if (i < 0 || i >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(i);
}
}  // namespace

Value Evaluator::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_mapping()) {
    const Value* v = key.is_string() ? obj.as_dict().find(key.as_string()) : nullptr;
    return v ? *v : Value::undefined("'dict object' has no attribute '" + key.str() + "'");
  }
  if ((obj.is_list() || obj.is_string()) && (key.kind() == Value::Kind::Int || key.kind() == Value::Kind::Bool)) {
    if (obj.is_list()) {
      auto i = index_of(key.as_int(), obj.as_list().size());
      return i ? obj.as_list()[*i] : Value::undefined("list index " + key.str() + " out of range");
    }
    std::u32string u = text::decode(obj.as_string());
    auto i = index_of(key.as_int(), u.size());
    return i ? Value::string(text::encode(u.substr(*i, 1))) : Value::undefined("string index out of range");
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + key.str() + "'");
}

Value Evaluator::get_slice(const Value& obj, const Expr& e) {
  if (obj.is_undefined()) undefined_error(obj);
  auto bound = [&](size_t k) -> std::optional<int64_t> {
    if (!e.items[k]) return std::nullopt;
    Value v = eval(*e.items[k]);
    if (v.is_none()) return std::nullopt;
    if (v.kind() != Value::Kind::Int) fail("slice indices must be integers or None, got " + v.type_name());
    return v.as_int();
  };
  std::optional<int64_t> lo = bound(1), hi = bound(2), st = bound(3);
  int64_t step = st.value_or(1);
  if (step == 0) fail("ValueError: slice step cannot be zero");
  List src = obj.is_list() ? obj.as_list() : List{};
  std::u32string chars;
  if (obj.is_string()) chars = text::decode(obj.as_string());
  else if (!obj.is_list()) fail("TypeError: '" + obj.type_name() + "' object is not subscriptable");
  const int64_t n = static_cast<int64_t>(obj.is_list() ? src.size() : chars.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {  // Python's PySlice_AdjustIndices
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    if (step > 0) return std::min(std::max<int64_t>(x, 0), n);
    return std::min(std::max<int64_t>(x, -1), n - 1);
  };
  int64_t a = clamp(lo, step > 0 ? 0 : n - 1), b = clamp(hi, step > 0 ? n : -1);
  List out;
  std::u32string out_chars;
  for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
    if (obj.is_list()) out.push_back(src[static_cast<size_t>(i)]);
    else out_chars.push_back(chars[static_cast<size_t>(i)]);
  }
  return obj.is_list() ? Value::list(std::move(out)) : Value::string(text::encode(out_chars));
}

}  // namespace hpcrl::io::jinja
