// Rendering of positions and diagnostics (see diagnostics.h), and the enum
// name tables' splitter (enums.h), the two formatting helpers every other
// config file relies on.
#include "hpcrl/config/diagnostics.h"

#include <cstring>

#include "hpcrl/config/enums.h"

namespace hpcrl::config {

std::string SourcePos::str() const {
  if (from_override()) return set_arg;
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string Diagnostic::str() const {
  std::string out = pos.str();
  if (!path.empty()) out += (out.empty() ? "" : ": ") + path;
  out += (out.empty() ? "" : ": ") + message;
  if (!fix.empty()) out += "; " + fix;
  return out;
}

void Diagnostics::error(const SourcePos& pos, const std::string& path, const std::string& message,
                        const std::string& fix) {
  errors.push_back({Severity::kError, pos, path, message, fix});
}

void Diagnostics::warning(const SourcePos& pos, const std::string& path, const std::string& message,
                          const std::string& fix) {
  warnings.push_back({Severity::kWarning, pos, path, message, fix});
}

namespace {
std::string join_errors(const std::vector<Diagnostic>& errors) {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "\n") + e.str();
  return out;
}
}  // namespace

ConfigError::ConfigError(std::vector<Diagnostic> errors)
    : InputError(join_errors(errors)), errors_(std::move(errors)) {}

namespace detail {
std::vector<std::string> split_enum_names(const char* stringified) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = stringified;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty() && cur[0] == '_') cur.erase(0, 1);
      out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      cur += *c;
    }
  }
  return out;
}
}  // namespace detail

}  // namespace hpcrl::config
