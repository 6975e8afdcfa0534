// Runs a parsed template (ast.h): scopes as Jinja has them (a for-loop
// iteration and a macro call get their own; `if` does not), loop variables,
// macros, and the step and output limits of RenderOptions.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "hpcrl/io/jinja.h"
#include "io/jinja/ast.h"

namespace hpcrl::io::jinja {

class Evaluator {
 public:
  Evaluator(const RenderOptions& options) : options_(options) {}

  // Renders `program` with `globals` as the outermost scope.
  std::string render(const Program& program, std::unordered_map<std::string, Value> globals);

 private:
  enum class Flow { Normal, Break, Continue };
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    bool isolated = false;  // a macro call: names resolve here, then in the globals
  };

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s);
  void define_macro(const Stmt& s);
  Value call_macro(const Stmt& s, const CallArgs& args);
  void write(std::string& out, const std::string& text);

  Value eval(const Expr& e);
  Value eval_node(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value get_slice(const Value& obj, const Expr& e);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { frames_.back().vars[name] = std::move(v); }
  void step(int line, int column);

  RenderOptions options_;
  std::vector<Frame> frames_;
  int64_t steps_ = 0, written_ = 0;
  int macro_depth_ = 0;  // nested macro calls; bounded like Python's recursion limit
};

}  // namespace hpcrl::io::jinja
