// A Jinja interpreter for the subset Hugging Face chat templates use (the
// `chat_template` of a tokenizer_config.json), rendering in HF's environment:
// trim_blocks and lstrip_blocks on, autoescape off, `tojson` as HF defines it
// (ensure_ascii=False, keys in insertion order), and the globals
// raise_exception(msg) and strftime_now(fmt).
//
// Supported: {{ }}, {% %}, {# #}, `-` whitespace control; for (loop.*, else,
// `if` filter, tuple unpacking, break/continue), if/elif/else, set (also
// namespace attributes and {% set %}...{% endset %}), macro; literals, lists,
// dicts, attribute/subscript/slice, arithmetic, comparisons, in / not in,
// ~, not/and/or, `a if c else b`, tests (defined, none, string, mapping, ...),
// the filters and Python string/dict methods that HF templates call. Undefined
// names behave like Jinja's default Undefined. Anything else is refused at
// compile time with its line and column.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace hpcrl::io::jinja {

struct Program;  // the parsed template (src/io/jinja/ast.h)

struct RenderOptions {
  // What strftime_now() formats; nullopt = the local time when called.
  std::optional<std::tm> now;
  // Runaway guards: evaluation steps (expression nodes and statements) and
  // output bytes; exceeding either is an InputError naming the limit.
  int64_t max_steps = 20'000'000;
  int64_t max_output_bytes = 64 << 20;
};

class Template {
 public:
  // Parses `text`; InputError "<name>:LINE:COL: ..." on a syntax error or a
  // construct outside the supported subset. `name` labels every message.
  static Template compile(const std::string& text, const std::string& name = "template");

  // Renders with the variables of `context` (an object; its key order is the
  // order templates see, e.g. in tojson). Errors, including the template's
  // own raise_exception(msg), are InputError with the template location.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  Template(std::shared_ptr<const Program> program, std::string name)
      : program_(std::move(program)), name_(std::move(name)) {}
  std::shared_ptr<const Program> program_;
  std::string name_;
};

}  // namespace hpcrl::io::jinja
