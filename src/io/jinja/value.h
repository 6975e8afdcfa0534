// Values of the Jinja interpreter: Python's types as Jinja templates see them
// (None, bool, int, float, str, list, dict in insertion order), Jinja's
// Undefined, namespace() objects (shared and mutable) and callables.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpcrl::io::jinja {

class Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // Undefined
  static Value undefined(std::string name = "") { Value v; v.str_ = std::move(name); return v; }
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b) { Value v(Kind::Bool); v.int_ = b; return v; }
  static Value integer(int64_t i) { Value v(Kind::Int); v.int_ = i; return v; }
  static Value number(double d) { Value v(Kind::Float); v.float_ = d; return v; }
  static Value string(std::string s) { Value v(Kind::String); v.str_ = std::move(s); return v; }
  static Value list(List items);
  static Value dict(Dict d);
  static Value name_space(Dict d);  // namespace(): a dict shared by reference
  static Value callable(std::string name, Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }      // Int and Bool
  double as_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }  // String; the name of an Undefined
  const List& as_list() const { return *list_; }
  List& mutable_list() { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces are shared, so writes are seen by all holders
  const Function& function() const { return *fn_; }

  // Python's truth value (Undefined is false).
  bool truthy() const;
  // str(x) as Jinja prints it: '' for Undefined and None prints 'None'.
  std::string str() const;
  // repr(x): strings quoted, as inside a printed list or dict.
  std::string repr() const;
  // Python ==, deep for lists and dicts; Undefined equals only Undefined.
  bool equals(const Value& other) const;
  // Type name for error messages ("str", "int", "list", ...).
  std::string type_name() const;
  nlohmann::ordered_json to_json() const;  // tojson; Undefined/callables are refused

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::Undefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// A dict with string keys in insertion order (Python 3.7+).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The argument at `pos` or named `name`; Undefined when absent.
  Value get(size_t pos, const std::string& name) const;
};

// Python float repr (shortest text that reads back the same, e.g. 0.1, 1.0, 1e+16).
std::string python_float(double d);

}  // namespace hpcrl::io::jinja
