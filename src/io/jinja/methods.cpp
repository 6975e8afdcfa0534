// Python methods of str and dict that HF chat templates call, e.g.
// content.split('</think>')[-1].lstrip('\n') or tool.items() (builtins.h).
#include <cctype>
#include <cstdint>

#include "io/jinja/builtins.h"
#include "io/jinja/failure.h"
#include "io/jinja/text.h"

namespace hpcrl::io::jinja {
namespace {

std::optional<std::string> opt_string(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) fail("TypeError: expected a str argument, got " + v.type_name());
  return v.as_string();
}

int64_t opt_int(const Value& v, int64_t fallback) { return v.is_undefined() || v.is_none() ? fallback : v.as_int(); }

// startswith/endswith with a str or a tuple (list) of them.
bool affix(const std::string& s, const Value& arg, bool prefix) {
  List options = arg.is_list() ? arg.as_list() : List{arg};
  for (const auto& o : options) {
    if (!o.is_string()) fail("TypeError: startswith/endswith arg must be str or a tuple of str");
    const std::string& p = o.as_string();
    if (p.size() <= s.size() && (prefix ? s.compare(0, p.size(), p) : s.compare(s.size() - p.size(), p.size(), p)) == 0)
      return true;
  }
  return false;
}

// str.format with {} / {0} / {name} fields and {{ }} escapes.
std::string format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("ValueError: unmatched '{' in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) fail("str.format: format specs are not supported");
    Value v = field.empty() ? a.get(auto_index++, "")
              : std::isdigit(static_cast<unsigned char>(field[0])) ? a.get(std::stoul(field), "")
                                                                   : a.get(SIZE_MAX, field);
    out += v.str();
    i = close;
  }
  return out;
}

bool string_method(const std::string& s, const std::string& name, const CallArgs& a, Value* r) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    *r = Value::string(text::strip(s, opt_string(a.get(0, "chars")), name != "rstrip", name != "lstrip"));
  } else if (name == "startswith" || name == "endswith") {
    *r = Value::boolean(affix(s, a.get(0, "prefix"), name == "startswith"));
  } else if (name == "split") {
    List parts;
    for (auto& p : text::split(s, opt_string(a.get(0, "sep")), opt_int(a.get(1, "maxsplit"), -1)))
      parts.push_back(Value::string(p));
    *r = Value::list(parts);
  } else if (name == "replace") {
    *r = Value::string(text::replace(s, a.get(0, "old").str(), a.get(1, "new").str(), opt_int(a.get(2, "count"), -1)));
  } else if (name == "upper") {
    *r = Value::string(text::upper(s));
  } else if (name == "lower") {
    *r = Value::string(text::lower(s));
  } else if (name == "title") {
    *r = Value::string(text::title(s));
  } else if (name == "capitalize") {
    *r = Value::string(text::capitalize(s));
  } else if (name == "format") {
    *r = Value::string(format(s, a));
  } else if (name == "join") {
    std::string out;
    List items = iterate(a.get(0, "iterable"));
    for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + items[i].str();
    *r = Value::string(out);
  } else if (name == "find") {
    size_t at = s.find(a.get(0, "sub").str());
    *r = Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(text::length(s.substr(0, at))));
  } else {
    return false;
  }
  return true;
}

bool dict_method(const Dict& d, const std::string& name, const CallArgs& a, Value* r) {
  List out;
  if (name == "items") {
    for (const auto& [k, v] : d.items) out.push_back(Value::list({Value::string(k), v}));
  } else if (name == "keys") {
    for (const auto& kv : d.items) out.push_back(Value::string(kv.first));
  } else if (name == "values") {
    for (const auto& kv : d.items) out.push_back(kv.second);
  } else if (name == "get") {
    const Value* v = d.find(a.get(0, "key").str());
    Value fallback = a.get(1, "default");
    *r = v ? *v : fallback.is_undefined() ? Value::none() : fallback;
    return true;
  } else {
    return false;
  }
  *r = Value::list(out);
  return true;
}

}  // namespace

bool call_method(const Value& obj, const std::string& name, const CallArgs& args, Value* result) {
  if (obj.is_string()) return string_method(obj.as_string(), name, args, result);
  if (obj.kind() == Value::Kind::Dict) return dict_method(obj.as_dict(), name, args, result);
  return false;
}

}  // namespace hpcrl::io::jinja
