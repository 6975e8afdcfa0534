// Jinja lexer (lexer.h). Follows jinja2.lexer's rules for HF's environment:
// `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/`-#}`
// all whitespace after; trim_blocks drops one "\n" after `%}` and `#}`;
// lstrip_blocks drops spaces and tabs between a line start and `{%`/`{#`
// (not `{%+`).
#include "io/jinja/lexer.h"

#include "io/tokenizer_bytes.h"

#include <cctype>
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "hpcrl/util/error.h"

namespace hpcrl::io::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& name) : src_(src), name_(name) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        emit_text(text);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char mod = open + 2 < src_.size() ? src_[open + 2] : 0;
      if (mod == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (kind != '{' && mod != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && text.find_first_not_of(" \t", l_pos) == std::string::npos)
          text.resize(l_pos);
      }
      emit_text(text);
      advance_to(open);
      size_t body = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') line_starting = comment(body);
      else line_starting = tag(kind, body);
    }
    tokens_.push_back({Token::Kind::Eof, "", line_, col_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  [[noreturn]] void error(const std::string& what, int line, int col) const {
    throw InputError(name_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void advance_to(size_t to) {
    for (; pos_ < to; ++pos_) {
      if (src_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else if ((static_cast<unsigned char>(src_[pos_]) & 0xC0) != 0x80) {
        ++col_;
      }
    }
  }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::Text, text, line_, col_});
  }

  // After a closing delimiter ending at `end`: `-` strips all following
  // whitespace, a plain block/comment end one newline. Returns whether what
  // was consumed ends with "\n" (Jinja's line_starting).
  bool close(size_t end, bool minus, bool trim) {
    advance_to(end);
    if (minus) {
      size_t e = pos_;
      while (e < src_.size() && is_space(src_[e])) ++e;
      bool nl = e > pos_ && src_[e - 1] == '\n';
      advance_to(e);
      return nl;
    }
    if (trim && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
      return true;
    }
    return false;
  }

  bool comment(size_t body) {
    int line = line_, col = col_;
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) error("comment is never closed with #}", line, col);
    bool minus = end > body && src_[end - 1] == '-';
    return close(end + 2, minus, true);
  }

  bool tag(char kind, size_t body) {
    int line = line_, col = col_;
    tokens_.push_back({kind == '{' ? Token::Kind::VarBegin : Token::Kind::BlockBegin, "", line, col});
    advance_to(body);
    const char* closer = kind == '{' ? "}}" : "%}";
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) error(std::string("tag is never closed with ") + closer, line, col);
      bool minus = src_.compare(pos_, 3, std::string("-") + closer) == 0;
      bool plus = src_.compare(pos_, 3, std::string("+") + closer) == 0;
      if (depth == 0 && (minus || plus || src_.compare(pos_, 2, closer) == 0)) {
        tokens_.push_back({kind == '{' ? Token::Kind::VarEnd : Token::Kind::BlockEnd, "", line_, col_});
        size_t end = pos_ + 2 + ((minus || plus) ? 1 : 0);
        return close(end, minus, kind == '%' && !plus);
      }
      char c = src_[pos_];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      expression_token();
    }
  }

  void expression_token();
  void string_token();
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  const std::string& src_;
  const std::string& name_;
  std::vector<Token> tokens_;
};

void Lexer::expression_token() {
  int line = line_, col = col_;
  char c = src_[pos_];
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    size_t e = pos_;
    while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    tokens_.push_back({Token::Kind::Name, src_.substr(pos_, e - pos_), line, col});
    advance_to(e);
    return;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    size_t e = pos_;
    bool is_float = false;
    while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        e = x;
        while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
      }
    }
    std::string text = src_.substr(pos_, e - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? Token::Kind::Float : Token::Kind::Int, text, line, col});
    advance_to(e);
    return;
  }
  if (c == '\'' || c == '"') return string_token();
  static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                              ".",  ",",  ":",  "|",  "(",  ")",  "[", "]", "{", "}"};
  for (const char* op : ops) {
    size_t n = std::strlen(op);
    if (src_.compare(pos_, n, op) == 0) {
      tokens_.push_back({Token::Kind::Op, op, line, col});
      advance_to(pos_ + n);
      return;
    }
  }
  error(std::string("unexpected character '") + c + "'", line, col);
}


// A quoted string with Python's escapes (Jinja decodes them as unicode-escape).
void Lexer::string_token() {
  int line = line_, col = col_;
  char quote = src_[pos_];
  size_t i = pos_ + 1;
  std::string out;
  while (true) {
    if (i >= src_.size()) error("string is never closed", line, col);
    char c = src_[i];
    if (c == quote) break;
    if (c != '\\' || i + 1 >= src_.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    char e = src_[i + 1];
    i += 2;
    auto hex = [&](int n) {
      if (i + n > src_.size()) error("truncated \\x/\\u escape in string", line, col);
      uint32_t cp = static_cast<uint32_t>(std::stoul(src_.substr(i, n), nullptr, 16));
      i += n;
      bytes::utf8_append(out, static_cast<int32_t>(cp));
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      default: out += '\\'; out += e;
    }
  }
  tokens_.push_back({Token::Kind::String, out, line, col});
  advance_to(i + 1);
}

}  // namespace

std::vector<Token> lex(const std::string& source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace hpcrl::io::jinja
