// Jinja statements (parser.h): text, {{ output }}, if/elif/else, for, set,
// macro, break/continue; and the parser's entry point.
#include "io/jinja/parser.h"

#include <algorithm>

#include "hpcrl/util/error.h"
#include "io/jinja/parser_state.h"

namespace hpcrl::io::jinja {

void Parser::error(const Token& at, const std::string& what) const {
  throw InputError(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + what);
}

std::string Parser::describe(const Token& t) {
  switch (t.kind) {
    case Token::Kind::Eof: return "the end of the template";
    case Token::Kind::VarEnd: return "'}}'";
    case Token::Kind::BlockEnd: return "'%}'";
    case Token::Kind::String: return "a string";
    case Token::Kind::Text: return "template text";
    default: return "'" + t.text + "'";
  }
}

void Parser::expect_op(const char* op) {
  if (!is_op(op)) error(peek(), std::string("expected '") + op + "', found " + describe(peek()));
  next();
}

std::string Parser::expect_name() {
  if (peek().kind != Token::Kind::Name) error(peek(), "expected a name, found " + describe(peek()));
  return next().text;
}

void Parser::expect_block_end() {
  if (peek().kind != Token::Kind::BlockEnd) error(peek(), "expected '%}', found " + describe(peek()));
  next();
}

Body Parser::body(const std::vector<std::string>& end_tags) {
  if (++depth_ > 200) error(peek(), "blocks nest deeper than 200 levels");
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  Body out;
  while (true) {
    const Token& t = peek();
    if (t.kind == Token::Kind::Eof) {
      if (!end_tags.empty()) error(t, "missing {% " + end_tags.back() + " %}");
      return out;
    }
    if (t.kind == Token::Kind::Text) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::Text;
      s->text = next().text;
      out.push_back(std::move(s));
    } else if (t.kind == Token::Kind::VarBegin) {
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::Output;
      s->line = t.line;
      s->column = t.column;
      s->expr = expression(true);
      if (peek().kind != Token::Kind::VarEnd) error(peek(), "expected '}}', found " + describe(peek()));
      next();
      out.push_back(std::move(s));
    } else {
      const Token& tag = peek(1);
      if (tag.kind == Token::Kind::Name && std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end())
        return out;
      next();
      out.push_back(statement(t));
    }
  }
}

void Parser::end_tag(const char* name) {
  next();  // {%
  const Token& t = peek();
  if (expect_name() != name) error(t, std::string("expected {% ") + name + " %}, found " + describe(t));
  expect_block_end();
}

std::unique_ptr<Stmt> Parser::statement(const Token& begin) {
  const Token& t = peek();
  std::string tag = expect_name();
  if (tag == "if") return if_statement(begin);
  if (tag == "for") return for_statement(begin);
  if (tag == "set") return set_statement(begin);
  if (tag == "macro") return macro_statement(begin);
  if (tag == "break" || tag == "continue") {
    expect_block_end();
    auto s = std::make_unique<Stmt>();
    s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
    s->line = begin.line;
    s->column = begin.column;
    return s;
  }
  if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else")
    error(t, "{% " + tag + " %} without the block it closes");
  error(t, "the tag {% " + tag + " %} is not supported (supported: if, for, set, macro, break, continue)");
}

std::unique_ptr<Stmt> Parser::if_statement(const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Kind::If;
  s->line = at.line;
  s->column = at.column;
  ExprPtr cond = expression(true);
  while (true) {
    expect_block_end();
    s->branches.emplace_back(std::move(cond), body({"elif", "else", "endif"}));
    next();  // {%
    std::string tag = expect_name();
    if (tag == "elif") {
      cond = expression(true);
      continue;
    }
    if (tag == "else") {
      expect_block_end();
      s->else_body = body({"endif"});
      end_tag("endif");
    } else {
      expect_block_end();
    }
    return s;
  }
}

std::unique_ptr<Stmt> Parser::for_statement(const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Kind::For;
  s->line = at.line;
  s->column = at.column;
  s->targets.push_back(expect_name());
  while (is_op(",")) {
    next();
    s->targets.push_back(expect_name());
  }
  if (!is_name("in")) error(peek(), "expected 'in' in the for loop, found " + describe(peek()));
  next();
  s->expr = expression(false);
  if (is_name("if")) {
    next();
    s->filter = expression(true);
  }
  if (is_name("recursive")) error(peek(), "recursive for loops are not supported");
  expect_block_end();
  s->body = body({"else", "endfor"});
  next();  // {%
  if (expect_name() == "else") {
    expect_block_end();
    s->else_body = body({"endfor"});
    end_tag("endfor");
  } else {
    expect_block_end();
  }
  return s;
}

std::unique_ptr<Stmt> Parser::set_statement(const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Kind::Set;
  s->line = at.line;
  s->column = at.column;
  s->targets.push_back(expect_name());
  if (is_op(".")) {
    next();
    s->attr_target = true;
    s->targets.push_back(expect_name());
  }
  while (!s->attr_target && is_op(",")) {
    next();
    s->targets.push_back(expect_name());
  }
  if (peek().kind == Token::Kind::BlockEnd && s->targets.size() == 1) {  // {% set x %}...{% endset %}
    next();
    s->body = body({"endset"});
    end_tag("endset");
    return s;
  }
  expect_op("=");
  const Token& value_at = peek();
  s->expr = expression(true);
  if (is_op(",")) {  // set x = a, b builds a tuple
    auto tuple = std::make_unique<Expr>();
    tuple->kind = Expr::Kind::List;
    tuple->line = value_at.line;
    tuple->column = value_at.column;
    tuple->items.push_back(std::move(s->expr));
    while (is_op(",")) {
      next();
      tuple->items.push_back(expression(true));
    }
    s->expr = std::move(tuple);
  }
  expect_block_end();
  return s;
}

std::unique_ptr<Stmt> Parser::macro_statement(const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::Kind::Macro;
  s->line = at.line;
  s->column = at.column;
  s->text = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    if (!s->params.empty()) expect_op(",");
    std::string param = expect_name();
    ExprPtr def;
    if (is_op("=")) {
      next();
      def = expression(true);
    }
    s->params.emplace_back(param, std::move(def));
  }
  next();
  expect_block_end();
  s->body = body({"endmacro"});
  end_tag("endmacro");
  return s;
}

std::unique_ptr<Program> parse(const std::string& source, const std::string& name) {
  Parser p(lex(source, name), name);
  auto program = std::make_unique<Program>();
  program->body = p.body({});
  return program;
}

}  // namespace hpcrl::io::jinja
