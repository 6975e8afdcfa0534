// Jinja's built-in filters that HF chat templates use (builtins.h), with
// Jinja 3.1's semantics and HF's tojson.
#include <algorithm>
#include <cstdlib>
#include <map>

#include "io/jinja/builtins.h"
#include "io/jinja/failure.h"
#include "io/jinja/text.h"
#include "io/jinja/tojson.h"

namespace hpcrl::io::jinja {
namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);

std::optional<std::string> opt_string(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return v.str();
}

Value f_tojson(const Value& v, const CallArgs& a) {
  if (a.get(99, "ensure_ascii").truthy()) fail("tojson(ensure_ascii=True) is not supported");
  Value indent = a.get(99, "indent");
  return Value::string(to_json_text(v, indent.is_undefined() || indent.is_none() ? -1 : static_cast<int>(indent.as_int()),
                                    a.get(99, "sort_keys").truthy()));
}

Value f_trim(const Value& v, const CallArgs& a) {
  return Value::string(text::strip(v.str(), opt_string(a.get(0, "chars")), true, true));
}

Value f_length(const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value::integer(0);
    case Value::Kind::String: return Value::integer(static_cast<int64_t>(text::length(v.as_string())));
    case Value::Kind::List: return Value::integer(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::Dict: case Value::Kind::Namespace:
      return Value::integer(static_cast<int64_t>(v.as_dict().items.size()));
    default: fail("TypeError: object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_first(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
}

Value f_last(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
}

Value item_attribute(const Value& item, const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return item;
  const Value* found = item.is_mapping() ? item.as_dict().find(attribute.str()) : nullptr;
  return found ? *found : Value::undefined("'" + item.type_name() + " object' has no attribute '" + attribute.str() + "'");
}

Value f_join(const Value& v, const CallArgs& a) {
  Value sep = a.get(0, "d"), attribute = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    if (!first) out += sep.str();
    first = false;
    out += item_attribute(item, attribute).str();
  }
  return Value::string(out);
}

Value f_upper(const Value& v, const CallArgs&) { return Value::string(text::upper(v.str())); }
Value f_lower(const Value& v, const CallArgs&) { return Value::string(text::lower(v.str())); }
Value f_capitalize(const Value& v, const CallArgs&) { return Value::string(text::capitalize(v.str())); }
Value f_title(const Value& v, const CallArgs&) { return Value::string(text::title(v.str())); }
Value f_string(const Value& v, const CallArgs&) { return Value::string(v.str()); }
Value f_safe(const Value& v, const CallArgs&) { return v; }

Value f_default(const Value& v, const CallArgs& a) {
  bool use_default = v.is_undefined() || (a.get(1, "boolean").truthy() && !v.truthy());
  if (!use_default) return v;
  Value d = a.get(0, "default_value");
  return d.is_undefined() ? Value::string("") : d;
}

Value f_int(const Value& v, const CallArgs& a) {
  Value d = a.get(0, "default");
  Value fallback = d.is_undefined() ? Value::integer(0) : d;
  if (v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool) return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::Float) return Value::integer(static_cast<int64_t>(v.as_double()));
  if (!v.is_string()) return fallback;
  std::string s = text::strip(v.as_string(), std::nullopt, true, true);
  char* end = nullptr;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == 0) return Value::integer(i);
  double d2 = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == 0) return Value::integer(static_cast<int64_t>(d2));
  return fallback;
}

Value f_float(const Value& v, const CallArgs& a) {
  Value d = a.get(0, "default");
  if (v.is_number()) return Value::number(v.as_double());
  char* end = nullptr;
  std::string s = v.str();
  double x = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == 0) return Value::number(x);
  return d.is_undefined() ? Value::number(0.0) : d;
}

Value f_list(const Value& v, const CallArgs&) { return Value::list(iterate(v)); }

Value f_items(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) fail("TypeError: can only get item pairs from a mapping, not " + v.type_name());
  List out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::list({Value::string(k), val}));
  return Value::list(out);
}

Value f_reverse(const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::u32string u = text::decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value::string(text::encode(u));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(items);
}

Value f_replace(const Value& v, const CallArgs& a) {
  Value count = a.get(2, "count");
  return Value::string(text::replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                     count.is_undefined() || count.is_none() ? -1 : count.as_int()));
}

// selectattr/rejectattr(attribute, test, args...) and select/reject(test, args...).
Value select(const Value& v, const CallArgs& a, bool by_attribute, bool keep) {
  size_t first_test = by_attribute ? 1 : 0;
  Value test = a.args.size() > first_test ? a.args[first_test] : Value();
  CallArgs test_args;
  for (size_t i = first_test + 1; i < a.args.size(); ++i) test_args.args.push_back(a.args[i]);
  List out;
  for (const auto& item : iterate(v)) {
    Value subject = by_attribute ? item_attribute(item, a.args.empty() ? Value() : a.args[0]) : item;
    bool pass = test.is_undefined() ? subject.truthy() : apply_test(test.str(), subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(out);
}

Value f_selectattr(const Value& v, const CallArgs& a) { return select(v, a, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& a) { return select(v, a, true, false); }
Value f_select(const Value& v, const CallArgs& a) { return select(v, a, false, true); }
Value f_reject(const Value& v, const CallArgs& a) { return select(v, a, false, false); }

// map(attribute='x'[, default=d]) or map('filter', args...).
Value f_map(const Value& v, const CallArgs& a) {
  Value attribute = a.get(99, "attribute");
  List out;
  if (!attribute.is_undefined()) {
    Value d = a.get(99, "default");
    for (const auto& item : iterate(v)) {
      Value x = item_attribute(item, attribute);
      out.push_back(x.is_undefined() && !d.is_undefined() ? d : x);
    }
    return Value::list(out);
  }
  if (a.args.empty()) fail("map() needs a filter name or attribute=");
  std::string filter = a.args[0].str();
  if (!is_known_filter(filter)) fail("no filter named '" + filter + "'");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const auto& item : iterate(v)) out.push_back(apply_filter(filter, item, rest));
  return Value::list(out);
}

Value f_abs(const Value& v, const CallArgs&) {
  if (v.kind() == Value::Kind::Float) return Value::number(std::abs(v.as_double()));
  if (v.is_number()) return Value::integer(std::llabs(v.as_int()));
  fail("TypeError: bad operand type for abs(): '" + v.type_name() + "'");
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"tojson", f_tojson},   {"trim", f_trim},           {"length", f_length},         {"count", f_length},
      {"first", f_first},     {"last", f_last},           {"join", f_join},             {"upper", f_upper},
      {"lower", f_lower},     {"capitalize", f_capitalize}, {"title", f_title},         {"string", f_string},
      {"safe", f_safe},       {"default", f_default},     {"d", f_default},             {"int", f_int},
      {"float", f_float},     {"list", f_list},           {"items", f_items},           {"reverse", f_reverse},
      {"replace", f_replace}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"select", f_select},
      {"reject", f_reject},   {"map", f_map},             {"abs", f_abs},
  };
  return table;
}

}  // namespace

bool is_known_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& value, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '" + name + "'");
  if (value.is_undefined() && name != "default" && name != "d" && name != "length" && name != "count" &&
      name != "list" && name != "items" && name != "string" && name != "join" && name != "first" && name != "last" &&
      name != "safe" && name != "trim" && name != "upper" && name != "lower" && name != "map" && name != "select" &&
      name != "selectattr" && name != "reject" && name != "rejectattr")
    undefined_error(value);
  return it->second(value, args);
}

}  // namespace hpcrl::io::jinja
