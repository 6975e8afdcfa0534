// Jinja expressions (parser.h), from lowest precedence up: a if c else b,
// or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +,
// then primaries with .attr, [item], [a:b:c], (call), | filter, is test.
#include "io/jinja/parser_state.h"

#include <cstdlib>

namespace hpcrl::io::jinja {

ExprPtr Parser::node(Expr::Kind kind, const Token& at) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->column = at.column;
  return e;
}

ExprPtr Parser::binary(const Token& at, std::string op, ExprPtr a, ExprPtr b) {
  auto e = node(Expr::Kind::Binary, at);
  e->name = std::move(op);
  e->items.push_back(std::move(a));
  e->items.push_back(std::move(b));
  return e;
}

namespace {
// Counts one level of nesting for the life of a production.
struct Nesting {
  explicit Nesting(int& d) : depth(d) { ++depth; }
  ~Nesting() { --depth; }
  int& depth;
};
constexpr int kMaxNesting = 200;
}  // namespace

ExprPtr Parser::expression(bool with_condexpr) {
  const Token& at = peek();
  Nesting nest(depth_);
  if (depth_ > kMaxNesting) error(at, "expressions nest deeper than " + std::to_string(kMaxNesting) + " levels");
  ExprPtr e = parse_or();
  if (!with_condexpr) return e;
  while (is_name("if")) {
    next();
    auto c = node(Expr::Kind::Cond, at);
    c->items.push_back(std::move(e));
    c->items.push_back(parse_or());
    if (is_name("else")) {
      next();
      c->items.push_back(expression(true));
    } else {
      c->items.push_back(nullptr);
    }
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    const Token& at = next();
    e = binary(at, "or", std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    const Token& at = next();
    e = binary(at, "and", std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  Nesting nest(depth_);
  if (depth_ > kMaxNesting) error(peek(), "expressions nest deeper than " + std::to_string(kMaxNesting) + " levels");
  if (is_name("not")) {
    const Token& at = next();
    auto e = node(Expr::Kind::Unary, at);
    e->name = "not";
    e->items.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr e = parse_math1();
  while (true) {
    const Token& at = peek();
    std::string op;
    if (at.kind == Token::Kind::Op &&
        (at.text == "==" || at.text == "!=" || at.text == "<" || at.text == ">" || at.text == "<=" || at.text == ">="))
      op = at.text;
    else if (is_name("in"))
      op = "in";
    else if (is_name("not") && peek(1).kind == Token::Kind::Name && peek(1).text == "in")
      op = "not in";
    else
      return e;
    next();
    if (op == "not in") next();
    e = binary(at, op, std::move(e), parse_math1());
  }
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& at = next();
    e = binary(at, at.text, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  ExprPtr e = parse_math2();
  while (is_op("~")) {
    const Token& at = next();
    e = binary(at, "~", std::move(e), parse_math2());
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& at = next();
    e = binary(at, at.text, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary();
  while (is_op("**")) {
    const Token& at = next();
    e = binary(at, "**", std::move(e), parse_unary());
  }
  return e;
}

ExprPtr Parser::parse_unary() {
  Nesting nest(depth_);
  if (depth_ > kMaxNesting) error(peek(), "expressions nest deeper than " + std::to_string(kMaxNesting) + " levels");
  if (is_op("-") || is_op("+")) {
    const Token& at = next();
    auto e = node(Expr::Kind::Unary, at);
    e->name = at.text;
    e->items.push_back(parse_unary());
    return filters_and_tests(std::move(e));
  }
  return filters_and_tests(postfix(primary()));
}

ExprPtr Parser::primary() {
  const Token& t = next();
  switch (t.kind) {
    case Token::Kind::Name: {
      auto e = node(Expr::Kind::Literal, t);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = t.text;
      }
      return e;
    }
    case Token::Kind::String: {
      auto e = node(Expr::Kind::Literal, t);
      std::string s = t.text;
      while (peek().kind == Token::Kind::String) s += next().text;  // adjacent literals join
      e->value = Value::string(s);
      return e;
    }
    case Token::Kind::Int: {
      auto e = node(Expr::Kind::Literal, t);
      e->value = Value::integer(std::strtoll(t.text.c_str(), nullptr, 10));
      return e;
    }
    case Token::Kind::Float: {
      auto e = node(Expr::Kind::Literal, t);
      e->value = Value::number(std::strtod(t.text.c_str(), nullptr));
      return e;
    }
    case Token::Kind::Op:
      if (t.text == "(") return parenthesized(t);
      if (t.text == "[") return list_literal(t);
      if (t.text == "{") return dict_literal(t);
      break;
    default: break;
  }
  error(t, "expected an expression, found " + describe(t));
}

ExprPtr Parser::parenthesized(const Token& open) {
  if (is_op(")")) {
    next();
    return node(Expr::Kind::List, open);  // () is an empty tuple
  }
  ExprPtr first = expression(true);
  if (!is_op(",")) {
    expect_op(")");
    return first;
  }
  auto tuple = node(Expr::Kind::List, open);  // tuples behave as lists here
  tuple->items.push_back(std::move(first));
  while (is_op(",")) {
    next();
    if (is_op(")")) break;
    tuple->items.push_back(expression(true));
  }
  expect_op(")");
  return tuple;
}

ExprPtr Parser::list_literal(const Token& open) {
  auto e = node(Expr::Kind::List, open);
  while (!is_op("]")) {
    if (!e->items.empty()) expect_op(",");
    if (is_op("]")) break;
    e->items.push_back(expression(true));
  }
  next();
  return e;
}

ExprPtr Parser::dict_literal(const Token& open) {
  auto e = node(Expr::Kind::Dict, open);
  while (!is_op("}")) {
    if (!e->items.empty()) expect_op(",");
    if (is_op("}")) break;
    e->items.push_back(expression(true));
    expect_op(":");
    e->items.push_back(expression(true));
  }
  next();
  return e;
}

}  // namespace hpcrl::io::jinja
