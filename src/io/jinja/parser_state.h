// The parser's token cursor and its productions (parser_expr.cpp,
// parser_postfix.cpp, parser_stmt.cpp). Internal to src/io/jinja.
#pragma once

#include <string>
#include <vector>

#include "io/jinja/ast.h"
#include "io/jinja/lexer.h"

namespace hpcrl::io::jinja {

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string name) : tokens_(std::move(tokens)), name_(std::move(name)) {}

  // Statements up to one of `end_tags` (left unread after its `{%`) or the end.
  Body body(const std::vector<std::string>& end_tags);
  ExprPtr expression(bool with_condexpr);

  const Token& peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return tokens_[i < tokens_.size() ? i : tokens_.size() - 1];
  }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return peek().kind == Token::Kind::Op && peek().text == op; }
  bool is_name(const char* n) const { return peek().kind == Token::Kind::Name && peek().text == n; }
  void expect_op(const char* op);
  std::string expect_name();
  void expect_block_end();
  [[noreturn]] void error(const Token& at, const std::string& what) const;
  static std::string describe(const Token& t);

 private:
  ExprPtr node(Expr::Kind kind, const Token& at);
  ExprPtr binary(const Token& at, std::string op, ExprPtr a, ExprPtr b);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary();
  ExprPtr primary();
  ExprPtr parenthesized(const Token& open);
  ExprPtr list_literal(const Token& open);
  ExprPtr dict_literal(const Token& open);
  ExprPtr postfix(ExprPtr e);
  ExprPtr subscript(ExprPtr e, const Token& open);
  ExprPtr filters_and_tests(ExprPtr e);
  void call_args(Expr& call);

  std::unique_ptr<Stmt> statement(const Token& begin);
  std::unique_ptr<Stmt> if_statement(const Token& at);
  std::unique_ptr<Stmt> for_statement(const Token& at);
  std::unique_ptr<Stmt> set_statement(const Token& at);
  std::unique_ptr<Stmt> macro_statement(const Token& at);
  void end_tag(const char* name);

  std::vector<Token> tokens_;
  std::string name_;
  size_t pos_ = 0;
  int depth_ = 0;  // nested expressions and blocks; bounded so a hostile template cannot exhaust the stack
};

}  // namespace hpcrl::io::jinja
