// Jinja postfix expressions (parser.h): .attr, [item], [a:b:c], (args),
// | filter(args) and `is [not] test(args)`.
#include "io/jinja/builtins.h"
#include "io/jinja/parser_state.h"

namespace hpcrl::io::jinja {

ExprPtr Parser::postfix(ExprPtr e) {
  while (true) {
    if (is_op(".")) {
      const Token& dot = next();
      const Token& t = next();
      if (t.kind == Token::Kind::Int) {  // x.0 is x[0]
        auto item = node(Expr::Kind::Item, dot);
        auto index = node(Expr::Kind::Literal, t);
        index->value = Value::integer(std::stoll(t.text));
        item->items.push_back(std::move(e));
        item->items.push_back(std::move(index));
        e = std::move(item);
        continue;
      }
      if (t.kind != Token::Kind::Name) error(t, "expected an attribute name after '.', found " + describe(t));
      auto attr = node(Expr::Kind::Attr, dot);
      attr->name = t.text;
      attr->items.push_back(std::move(e));
      e = std::move(attr);
    } else if (is_op("[")) {
      const Token& open = next();
      e = subscript(std::move(e), open);
    } else if (is_op("(")) {
      const Token& open = next();
      auto call = node(Expr::Kind::Call, open);
      call->items.push_back(std::move(e));
      call_args(*call);
      e = std::move(call);
    } else {
      return e;
    }
  }
}

ExprPtr Parser::subscript(ExprPtr e, const Token& open) {
  ExprPtr parts[3];
  int part = 0;
  bool slice = false;
  while (!is_op("]")) {
    if (is_op(":")) {
      next();
      slice = true;
      if (++part > 2) error(open, "a slice takes at most start:stop:step");
      continue;
    }
    if (parts[part]) error(peek(), "expected ':' or ']' in a subscript, found " + describe(peek()));
    parts[part] = expression(true);
  }
  next();
  if (!slice) {
    if (!parts[0]) error(open, "empty subscript []");
    auto item = node(Expr::Kind::Item, open);
    item->items.push_back(std::move(e));
    item->items.push_back(std::move(parts[0]));
    return item;
  }
  auto s = node(Expr::Kind::Slice, open);
  s->items.push_back(std::move(e));
  for (auto& p : parts) s->items.push_back(std::move(p));
  return s;
}

// After '(' : positional arguments, then name=value keywords, then ')'.
void Parser::call_args(Expr& call) {
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (peek().kind == Token::Kind::Name && peek(1).kind == Token::Kind::Op && peek(1).text == "=") {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(key, expression(true));
    } else {
      if (!call.kwargs.empty()) error(peek(), "a positional argument follows a keyword argument");
      call.items.push_back(expression(true));
    }
  }
  next();
}

ExprPtr Parser::filters_and_tests(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      const Token& bar = next();
      auto f = node(Expr::Kind::Filter, bar);
      const Token& name_at = peek();
      f->name = expect_name();
      if (!is_known_filter(f->name)) error(name_at, "no filter named '" + f->name + "'");
      f->items.push_back(std::move(e));
      if (is_op("(")) {
        next();
        call_args(*f);
      }
      e = std::move(f);
    } else if (is_name("is")) {
      const Token& at = next();
      auto t = node(Expr::Kind::Test, at);
      if (is_name("not")) {
        next();
        t->negated = true;
      }
      const Token& name_at = peek();
      t->name = expect_name();
      if (!is_known_test(t->name)) error(name_at, "no test named '" + t->name + "'");
      t->items.push_back(std::move(e));
      const Token& n = peek();
      bool bare_arg = n.kind == Token::Kind::String || n.kind == Token::Kind::Int || n.kind == Token::Kind::Float ||
                      (n.kind == Token::Kind::Name && n.text != "else" && n.text != "or" && n.text != "and" &&
                       n.text != "if" && n.text != "is" && n.text != "in" && n.text != "not");
      if (is_op("(")) {
        next();
        call_args(*t);
      } else if (bare_arg) {
        t->items.push_back(postfix(primary()));
      }
      e = std::move(t);
    } else {
      return e;
    }
  }
}

}  // namespace hpcrl::io::jinja
