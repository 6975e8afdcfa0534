// How Qwen2.5/Qwen3's ChatML templates render a tool-role message after an
// assistant turn: the text `tools: {format: qwen}` inserts around a tool's
// reply (tools/tool_call.h), and the wrapping a conversation dataset's tool
// messages get by default (io/dataset_conversation.h).
#pragma once

namespace hpcrl::config {

inline constexpr const char* kQwenToolReplyOpen = "<|im_end|>\n<|im_start|>user\n<tool_response>\n";
inline constexpr const char* kQwenToolReplyClose = "\n</tool_response><|im_end|>\n<|im_start|>assistant\n";

}  // namespace hpcrl::config
