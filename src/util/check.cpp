// Out-of-line failure paths of the CHECK macros, so every call site stays small.
#include "hpcrl/util/check.h"

namespace hpcrl::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& hint) {
  std::ostringstream os;
  os << file << ":" << line << ": check failed: " << cond;
  if (!hint.empty()) os << "\n  hint: " << hint;
  throw RuntimeError(os.str());
}

void input_check_failed(const std::string& hint) { throw InputError(hint); }

}  // namespace hpcrl::detail
