// The public Jinja API (hpcrl/io/jinja.h): compile once, render with a JSON
// context plus HF's globals raise_exception, strftime_now, and Jinja's
// namespace, range and dict.
#include "hpcrl/io/jinja.h"

#include "hpcrl/util/error.h"
#include "io/jinja/evaluator.h"
#include "io/jinja/failure.h"
#include "io/jinja/parser.h"

namespace hpcrl::io::jinja {
namespace {

Value kwargs_dict(const CallArgs& a, const char* fn) {
  if (!a.args.empty()) fail(std::string(fn) + "() takes keyword arguments only");
  Dict d;
  for (const auto& [k, v] : a.kwargs) d.set(k, v);
  return Value::dict(std::move(d));
}

Value range(CallArgs& a) {
  if (a.args.empty() || a.args.size() > 3) fail("range() takes 1 to 3 integer arguments");
  for (const auto& v : a.args)
    if (v.kind() != Value::Kind::Int) fail("range() arguments must be integers, got " + v.type_name());
  int64_t lo = a.args.size() == 1 ? 0 : a.args[0].as_int();
  int64_t hi = a.args.size() == 1 ? a.args[0].as_int() : a.args[1].as_int();
  int64_t step = a.args.size() == 3 ? a.args[2].as_int() : 1;
  if (step == 0) fail("range() step must not be zero");
  if ((hi - lo) / step > 1000000) fail("range() of more than 1000000 items");
  List out;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) out.push_back(Value::integer(i));
  return Value::list(std::move(out));
}

std::unordered_map<std::string, Value> globals(const nlohmann::ordered_json& context, const RenderOptions& opts) {
  std::unordered_map<std::string, Value> g;
  g["raise_exception"] = Value::callable("raise_exception", [](CallArgs& a) -> Value {
    fail("the template raised an error: " + a.get(0, "message").str());
  });
  std::optional<std::tm> now = opts.now;
  g["strftime_now"] = Value::callable("strftime_now", [now](CallArgs& a) {
    std::tm t{};
    if (now) {
      t = *now;
    } else {
      std::time_t s = std::time(nullptr);
      localtime_r(&s, &t);
    }
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, a.get(0, "format").str().c_str(), &t);
    return Value::string(std::string(buf, n));
  });
  g["namespace"] = Value::callable("namespace", [](CallArgs& a) {
    return Value::name_space(kwargs_dict(a, "namespace").as_dict());
  });
  g["dict"] = Value::callable("dict", [](CallArgs& a) { return kwargs_dict(a, "dict"); });
  g["range"] = Value::callable("range", range);
  if (!context.is_object()) throw InputError("the template context must be a JSON object");
  for (auto it = context.begin(); it != context.end(); ++it) g[it.key()] = Value::from_json(it.value());
  return g;
}

}  // namespace

Template Template::compile(const std::string& text, const std::string& name) {
  return Template(std::shared_ptr<const Program>(parse(text, name)), name);
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  Evaluator ev(options);
  try {
    return ev.render(*program_, globals(context, options));
  } catch (const Failure& f) {
    throw InputError(name_ + ":" + std::to_string(f.line) + ":" + std::to_string(f.column) + ": " + f.what());
  }
}

}  // namespace hpcrl::io::jinja
