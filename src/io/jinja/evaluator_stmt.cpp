// Statements of the Jinja evaluator (evaluator.h): output, if, for with
// loop.*, set (names, namespace attributes, blocks), macros.
#include "io/jinja/builtins.h"
#include "io/jinja/evaluator.h"
#include "io/jinja/failure.h"

namespace hpcrl::io::jinja {

std::string Evaluator::render(const Program& program, std::unordered_map<std::string, Value> globals) {
  frames_.clear();
  frames_.push_back({std::move(globals), false});
  std::string out;
  exec(program.body, out);
  return out;
}

void Evaluator::step(int line, int column) {
  if (++steps_ > options_.max_steps) {
    Failure f("rendering took more than " + std::to_string(options_.max_steps) +
              " steps (RenderOptions::max_steps); the template runs away, e.g. a loop over an ever-growing list");
    f.line = line;
    f.column = column;
    throw f;
  }
}

void Evaluator::write(std::string& out, const std::string& text) {
  written_ += static_cast<int64_t>(text.size());
  if (written_ > options_.max_output_bytes)
    fail("the output exceeds " + std::to_string(options_.max_output_bytes) + " bytes (RenderOptions::max_output_bytes)");
  out += text;
}

Evaluator::Flow Evaluator::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_stmt(const Stmt& s, std::string& out) {
  step(s.line, s.column);
  try {
    switch (s.kind) {
      case Stmt::Kind::Text: write(out, s.text); break;
      case Stmt::Kind::Output: write(out, eval(*s.expr).str()); break;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond).truthy()) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Kind::For: return exec_for(s, out);
      case Stmt::Kind::Set: exec_set(s); break;
      case Stmt::Kind::Macro: define_macro(s); break;
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
  } catch (Failure& f) {
    if (f.line == 0) {
      f.line = s.line;
      f.column = s.column;
    }
    throw;
  }
  return Flow::Normal;
}

namespace {
void bind_targets(std::unordered_map<std::string, Value>& vars, const std::vector<std::string>& targets,
                  const Value& item) {
  if (targets.size() == 1) {
    vars[targets[0]] = item;
    return;
  }
  List parts = iterate(item);
  if (parts.size() != targets.size())
    fail("ValueError: cannot unpack " + std::to_string(parts.size()) + " values into " +
         std::to_string(targets.size()) + " loop variables");
  for (size_t i = 0; i < targets.size(); ++i) vars[targets[i]] = parts[i];
}
}  // namespace

Evaluator::Flow Evaluator::exec_for(const Stmt& s, std::string& out) {
  Value iterable = eval(*s.expr);
  if (iterable.is_none()) fail("TypeError: 'NoneType' object is not iterable");
  List items = iterate(iterable);
  if (s.filter) {  // `for x in xs if cond`: the loop sees only the items that pass
    List kept;
    for (const auto& item : items) {
      frames_.push_back({});
      bind_targets(frames_.back().vars, s.targets, item);
      bool pass = eval(*s.filter).truthy();
      frames_.pop_back();
      if (pass) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step(s.line, s.column);  // an iteration counts even when its body is empty
    Dict loop;
    loop.set("index0", Value::integer(i));
    loop.set("index", Value::integer(i + 1));
    loop.set("revindex0", Value::integer(n - 1 - i));
    loop.set("revindex", Value::integer(n - i));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    frames_.push_back({});
    frames_.back().vars["loop"] = Value::dict(std::move(loop));
    bind_targets(frames_.back().vars, s.targets, items[i]);
    Flow f;
    try {
      f = exec(s.body, out);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& s) {
  if (s.attr_target) {
    Value ns = lookup(s.targets[0]);
    if (ns.kind() != Value::Kind::Namespace)
      fail("cannot assign attribute '" + s.targets[1] + "' on '" + s.targets[0] + "', which is a " + ns.type_name() +
           ", not a namespace()");
    ns.mutable_dict().set(s.targets[1], eval(*s.expr));
    return;
  }
  if (!s.expr) {  // {% set x %}...{% endset %}
    std::string captured;
    exec(s.body, captured);
    assign(s.targets[0], Value::string(captured));
    return;
  }
  Value v = eval(*s.expr);
  if (s.targets.size() == 1) {
    assign(s.targets[0], v);
    return;
  }
  std::unordered_map<std::string, Value> unpacked;
  bind_targets(unpacked, s.targets, v);
  for (auto& [k, val] : unpacked) assign(k, val);
}

void Evaluator::define_macro(const Stmt& s) {
  const Stmt* macro = &s;
  assign(s.text, Value::callable(s.text, [this, macro](CallArgs& args) { return call_macro(*macro, args); }));
}

Value Evaluator::call_macro(const Stmt& s, const CallArgs& args) {
  if (args.args.size() > s.params.size())
    fail("macro '" + s.text + "' takes " + std::to_string(s.params.size()) + " arguments, got " +
         std::to_string(args.args.size()));
  if (macro_depth_ >= 500) fail("macro '" + s.text + "' nests deeper than 500 calls; the template recurses without end");
  frames_.push_back({{}, true});
  ++macro_depth_;
  std::string out;
  try {
    for (size_t i = 0; i < s.params.size(); ++i) {
      const auto& [param, def] = s.params[i];
      Value v = args.get(i, param);
      if (v.is_undefined() && def) v = eval(*def);
      if (v.is_undefined()) v = Value::undefined("parameter '" + param + "' was not provided");
      frames_.back().vars[param] = v;
    }
    exec(s.body, out);
  } catch (...) {
    frames_.pop_back();
    --macro_depth_;
    throw;
  }
  frames_.pop_back();
  --macro_depth_;
  return Value::string(out);
}

Value Evaluator::lookup(const std::string& name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    auto it = frames_[i].vars.find(name);
    if (it != frames_[i].vars.end()) return it->second;
    if (frames_[i].isolated) break;
  }
  auto it = frames_.front().vars.find(name);
  if (it != frames_.front().vars.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace hpcrl::io::jinja
