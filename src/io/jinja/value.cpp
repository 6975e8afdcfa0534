// Jinja values (value.h): truth, printing, equality and JSON conversion with
// Python's rules.
#include "io/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "io/jinja/failure.h"

namespace hpcrl::io::jinja {

Value Value::list(List items) {
  Value v(Kind::List);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v(Kind::Dict);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::name_space(Dict d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::callable(std::string name, Function f) {
  Value v(Kind::Callable);
  v.str_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return dict(std::move(d));
    }
    default: return undefined();
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0.0;
    case Kind::String: return !str_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->items.empty();
    default: return true;
  }
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  // Python writes exponents with at least two digits and keeps ".0" on integral values.
  size_t e = s.find('e');
  if (e == std::string::npos) {
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  char sign = exp[0];
  std::string digits = exp.substr(1);
  while (digits.size() > 2 && digits[0] == '0') digits.erase(0, 1);
  int exponent = std::atoi(exp.c_str());
  if (exponent >= -4 && exponent < 16) {  // Python uses fixed notation there
    std::snprintf(buf, sizeof buf, "%.17g", d);
    for (int prec = 1; prec <= 17; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*f", prec, d);
      if (std::strtod(buf, nullptr) == d) break;
    }
    return buf;
  }
  return mant + "e" + sign + digits;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return int_ ? "True" : "False";
    case Kind::Int: return std::to_string(int_);
    case Kind::Float: return python_float(float_);
    case Kind::String: return str_;
    case Kind::Callable: return "<function " + str_ + ">";
    default: return repr();
  }
}

namespace {
std::string python_string_repr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + quote;
}
}  // namespace

std::string Value::repr() const {
  switch (kind_) {
    case Kind::String: return python_string_repr(str_);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i)
        out += (i ? ", " : "") + python_string_repr(dict_->items[i].first) + ": " + dict_->items[i].second.repr();
      return out + "}";
    }
    case Kind::Namespace: return "<Namespace>";
    default: return str();
  }
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Float || o.kind_ == Kind::Float) return as_double() == o.as_double();
    return int_ == o.int_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: return str_ == o.str_;
    case Kind::List: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* ov = o.dict_->find(k);
        if (!ov || !v.equals(*ov)) return false;
      }
      return true;
    }
    default: return dict_ == o.dict_ && fn_ == o.fn_;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    default: return "function";
  }
}

nlohmann::ordered_json Value::to_json() const {
  switch (kind_) {
    case Kind::None: return nullptr;
    case Kind::Bool: return int_ != 0;
    case Kind::Int: return int_;
    case Kind::Float: return float_;
    case Kind::String: return str_;
    case Kind::List: {
      auto out = nlohmann::ordered_json::array();
      for (const auto& e : *list_) out.push_back(e.to_json());
      return out;
    }
    case Kind::Dict: {
      auto out = nlohmann::ordered_json::object();
      for (const auto& [k, v] : dict_->items) out[k] = v.to_json();
      return out;
    }
    default: fail("Object of type " + type_name() + " is not JSON serializable");
  }
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& kv : items)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t pos, const std::string& name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return pos < args.size() ? args[pos] : Value();
}

}  // namespace hpcrl::io::jinja
