// Where a config value came from and what is wrong with it. Every value of a
// pipeline file keeps its SourcePos (file:line:col, 1-based, or the `--set`
// argument that produced it), so errors found long after parsing — by layout
// checks, by the runner — still point the user at the line to edit.
//
// A Diagnostic renders as `file:line:col: key.path: message; fix`. Validation
// collects all of them in one pass; ConfigError carries the list (for tests)
// and joins them with newlines as its what() (for the CLI).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/util/error.h"

namespace hpcrl::config {

struct SourcePos {
  std::string file;     // the pipeline file as the user named it ("" when unknown)
  int line = 0;         // 1-based; 0 = no line (whole-file problems)
  int col = 0;          // 1-based
  std::string set_arg;  // "--set a.b=v" when the value came from an override

  // "file:line:col", "file", or "--set a.b=v".
  std::string str() const;
  bool from_override() const { return !set_arg.empty(); }
};

enum class Severity { kError, kWarning };

struct Diagnostic {
  Severity severity = Severity::kError;
  SourcePos pos;
  std::string path;     // key path, e.g. "stages[0].sft.steps" ("" for whole-file problems)
  std::string message;  // what is wrong
  std::string fix;      // what to do about it

  // "file:line:col: key.path: message; fix"
  std::string str() const;
};

// Errors and warnings gathered during one load. Warnings never stop a load.
struct Diagnostics {
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;

  void error(const SourcePos& pos, const std::string& path, const std::string& message, const std::string& fix);
  void warning(const SourcePos& pos, const std::string& path, const std::string& message, const std::string& fix);
  bool ok() const { return errors.empty(); }
};

// The InputError a failed load throws: what() is every error's str() joined by '\n'.
class ConfigError : public InputError {
 public:
  explicit ConfigError(std::vector<Diagnostic> errors);
  const std::vector<Diagnostic>& errors() const { return errors_; }

 private:
  std::vector<Diagnostic> errors_;
};

}  // namespace hpcrl::config
