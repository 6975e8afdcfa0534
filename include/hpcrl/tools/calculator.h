// The built-in `calculator` tool: exact arithmetic on one expression, through
// the math reward's bounded parser (reward/math_expr.h) with its limits — the
// input size, nesting, node count, exponent and the estimated bit size of any
// value — so a hostile expression fails fast instead of hanging a rollout.
// Rational results are exact ("408", "-3/4"); irrational ones (√2, π) are
// decimals to 12 significant digits. Variables, words and anything the parser
// refuses are error results.
//
// Arguments: {"expression": "12*34"}, or the expression as a JSON string (the
// plain-tags call format passes the text between the tags).
#pragma once

#include "hpcrl/tools/tool.h"

namespace hpcrl::tools {

class Calculator : public Tool {
 public:
  explicit Calculator(std::string name = "calculator");
  const std::string& name() const override { return name_; }
  nlohmann::ordered_json schema() const override;
  ToolResult call(const nlohmann::json& arguments, const CallContext& context) override;
  bool instant() const override { return true; }

 private:
  std::string name_;
};

// The calculator's answer to one expression (what call() returns as text).
ToolResult evaluate_expression(const std::string& expression);

}  // namespace hpcrl::tools
