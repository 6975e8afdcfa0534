// Shared by the tools tests: the plain-tags call format of the products demo.
#pragma once

#include "hpcrl/tools/tool_call.h"

namespace hpcrl::testing {

// <calc>TEXT</calc>, the text the one tool's argument; replies in <result>...</result>.
inline tools::ToolCallFormat calc_tags() {
  tools::ToolCallFormat f;
  f.open = "<calc>";
  f.close = "</calc>";
  f.json = false;
  f.reply_open = "<result>";
  f.reply_close = "</result>";
  return f;
}

}  // namespace hpcrl::testing
