// Jinja parser: tokens (lexer.h) -> Program (ast.h), with Jinja's operator
// precedence. Constructs outside the supported subset are InputErrors naming
// the construct, the line and the column.
#pragma once

#include <memory>
#include <string>

#include "io/jinja/ast.h"

namespace hpcrl::io::jinja {

std::unique_ptr<Program> parse(const std::string& source, const std::string& name);

}  // namespace hpcrl::io::jinja
