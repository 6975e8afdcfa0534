// CHECK macros in the llm.c spirit: a failed check names file:line, the
// condition, and a hint that says what to do about it. They always run (not
// compiled out by NDEBUG): they guard shapes and layouts, not hot loops.
//
//   HPCRL_CHECK(x.size(0) % tp == 0, "batch " << x.size(0) << " not divisible by tp=" << tp);
//   HPCRL_CHECK_INPUT(n > 0, "--n must be at least 1");   // user error: exit 2
#pragma once

#include <sstream>
#include <string>

#include "hpcrl/util/error.h"

namespace hpcrl::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& hint);
[[noreturn]] void input_check_failed(const std::string& hint);
}  // namespace hpcrl::detail

#define HPCRL_CHECK(cond, hint_stream)                                                 \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::ostringstream hpcrl_check_os_;                                              \
      hpcrl_check_os_ << hint_stream;                                                  \
      ::hpcrl::detail::check_failed(__FILE__, __LINE__, #cond, hpcrl_check_os_.str()); \
    }                                                                                  \
  } while (0)

#define HPCRL_CHECK_INPUT(cond, message_stream)                          \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::ostringstream hpcrl_check_os_;                                \
      hpcrl_check_os_ << message_stream;                                 \
      ::hpcrl::detail::input_check_failed(hpcrl_check_os_.str());        \
    }                                                                    \
  } while (0)
