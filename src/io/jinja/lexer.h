// Jinja lexer: template text -> tokens, applying whitespace control (`-`/`+`
// modifiers) and HF's trim_blocks / lstrip_blocks as Jinja's own lexer does.
#pragma once

#include <string>
#include <vector>

namespace hpcrl::io::jinja {

struct Token {
  enum class Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
  Kind kind;
  std::string text;  // Text: the data; String: the unescaped value; Op/Name/Int/Float: as written
  int line = 1, column = 1;
};

// InputError "<name>:LINE:COL: ..." on an unterminated tag, comment or string.
std::vector<Token> lex(const std::string& source, const std::string& name);

}  // namespace hpcrl::io::jinja
