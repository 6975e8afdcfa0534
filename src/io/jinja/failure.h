// The error a Jinja construct raises while rendering. The evaluator attaches
// the line and column of the innermost node it was evaluating, and
// Template::render turns it into an InputError.
#pragma once

#include <stdexcept>
#include <string>

namespace hpcrl::io::jinja {

struct Failure : std::runtime_error {
  explicit Failure(const std::string& message) : std::runtime_error(message) {}
  int line = 0, column = 0;  // 0 until the evaluator places it
};

[[noreturn]] inline void fail(const std::string& message) { throw Failure(message); }

}  // namespace hpcrl::io::jinja
