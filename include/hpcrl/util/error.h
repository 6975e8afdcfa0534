// Errors that carry what the user needs to act: where (file:line:col or a key
// path), what went wrong, and the fix. Two kinds, because the CLI maps them to
// different exit codes: InputError (bad YAML, files, layouts, usage → exit 2)
// and everything else (runtime failure → exit 1). Stopped-resumable runs use
// exit 75 (see runner), not an exception.
#pragma once

#include <stdexcept>
#include <string>

#include "hpcrl/util/strings.h"

namespace hpcrl {

// Exit codes shared by every command.
enum ExitCode : int { kExitOk = 0, kExitRuntime = 1, kExitBadInput = 2, kExitResumable = 75 };

// A failure caused by what the user gave us. `what()` is the full message.
class InputError : public std::runtime_error {
 public:
  // A NUL byte (from a YAML key, say) is kept visible as "\0": what() is a C string.
  explicit InputError(const std::string& message) : std::runtime_error(str::show_nul(message)) {}
};

// An internal or environmental failure (a CHECK that fired, MPI failure, NaN loss).
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message) : std::runtime_error(str::show_nul(message)) {}
};

}  // namespace hpcrl
