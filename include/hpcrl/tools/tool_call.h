// How a model writes a tool call and reads its reply, as its chat template has
// it (docs/tools.md):
//
//   qwen  Qwen2.5/Qwen3 (ChatML): the assistant writes
//           <tool_call>\n{"name": "calculator", "arguments": {"expression": "12*34"}}\n</tool_call>
//         and the reply is a tool-role message, which these templates render as
//           <|im_end|>\n<|im_start|>user\n<tool_response>\n408\n</tool_response><|im_end|>\n<|im_start|>assistant\n
//   tags  a configurable pair of tags for byte-tokenizer models, around the
//         JSON call or (call: text) the argument text of the stage's one tool:
//           <calc>12*34</calc>  ->  <result>408</result>
//
// A turn ends when the model's text since its last reply ends with the close
// tag; the call is what lies between the last open tag before it and the close.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/config/tool_reply.h"

namespace hpcrl::tools {

struct ToolCallFormat {
  std::string open = "<tool_call>", close = "</tool_call>";
  bool json = true;  // {"name": ..., "arguments": ...} between the tags; false: the text is the one tool's argument
  std::string reply_open = config::kQwenToolReplyOpen;
  std::string reply_close = config::kQwenToolReplyClose;

  static ToolCallFormat qwen() { return {}; }
};

struct ParsedCall {
  std::string name;
  nlohmann::json arguments;
  std::string error;  // non-empty: the call is malformed (the model reads this as an error)
};

// Whether `text` (the model's turn so far) ends with the format's close tag.
bool ends_with_call(const std::string& text, const ToolCallFormat& format);

// The call `turn` (ending with the close tag) makes. With json the name must be
// one of `tools`; with text the call goes to tools[0] (the stage has one tool).
ParsedCall parse_call(const std::string& turn, const ToolCallFormat& format, const std::vector<std::string>& tools);

}  // namespace hpcrl::tools
