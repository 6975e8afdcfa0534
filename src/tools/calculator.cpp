// The calculator tool (calculator.h).
#include "hpcrl/tools/calculator.h"

#include <sstream>

#include "hpcrl/reward/math_expr.h"

namespace hpcrl::tools {

namespace {
std::string print(const GiNaC::ex& value) {
  std::ostringstream out;
  if (GiNaC::is_a<GiNaC::numeric>(value) && GiNaC::ex_to<GiNaC::numeric>(value).is_rational()) {
    out << value;  // exact: an integer or p/q
    return out.str();
  }
  const GiNaC::ex approx = value.evalf();
  if (!GiNaC::is_a<GiNaC::numeric>(approx) || !GiNaC::ex_to<GiNaC::numeric>(approx).is_real()) return "";
  out.precision(12);
  out << GiNaC::ex_to<GiNaC::numeric>(approx).to_double();
  return out.str();
}
}  // namespace

Calculator::Calculator(std::string name) : name_(std::move(name)) {}

nlohmann::ordered_json Calculator::schema() const {
  nlohmann::ordered_json expression = {{"type", "string"},
                                       {"description", "an arithmetic expression such as 12*34 or (7-2)/3"}};
  return {{"type", "function"},
          {"function",
           {{"name", name_},
            {"description", "Evaluates an arithmetic expression exactly (+ - * / ^, parentheses, fractions)."},
            {"parameters",
             {{"type", "object"}, {"properties", {{"expression", expression}}}, {"required", {"expression"}}}}}}};
}

ToolResult Calculator::call(const nlohmann::json& arguments, const CallContext&) {
  if (arguments.is_string()) return evaluate_expression(arguments.get<std::string>());
  if (arguments.is_object() && arguments.contains("expression") && arguments["expression"].is_string())
    return evaluate_expression(arguments["expression"].get<std::string>());
  return {"the calculator wants {\"expression\": \"...\"}, got " + arguments.dump(), true};
}

ToolResult evaluate_expression(const std::string& expression) {
  reward::SymbolTable symbols;
  const auto parsed = reward::parse_math_expr(expression, symbols);
  if (!parsed) return {"cannot evaluate \"" + expression + "\": not an arithmetic expression within the limits", true};
  if (!symbols.all().empty()) return {"cannot evaluate \"" + expression + "\": it has variables", true};
  std::string text = print(parsed->value);
  if (text.empty()) return {"cannot evaluate \"" + expression + "\": not a real number", true};
  return {text, false};
}

}  // namespace hpcrl::tools
