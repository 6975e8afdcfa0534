// A JSONL row's conversation as an Example: the multi-turn tool traces SFT
// trains on (docs/data.md "Conversations with tool calls"). The conversation
// is a list of {"role", "content"} messages in the shape hpcrl's multi-turn
// rollouts produce: one user message (the prompt), then an assistant message,
// then any number of (tool message, assistant message) pairs:
//
//   [{"role": "user", "content": "What is 12*34?"},
//    {"role": "assistant", "content": "<tool_call>\n{...}\n</tool_call>"},
//    {"role": "tool", "content": "408"},
//    {"role": "assistant", "content": "\\boxed{408}"}]
//
// The response is the assistant messages' text with each tool message between
// them wrapped in `reply_open` … `reply_close` (Qwen's ChatML tool turn by
// default) and marked inserted (Example::inserted: in the sequence, not
// trained on). An assistant message may carry its call as OpenAI's
// `tool_calls` (one entry, {"function": {"name", "arguments"}}, arguments an
// object or its JSON text) instead of in its content: it is written as Qwen's
// templates write it, `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`
// after the content.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hpcrl/io/dataset.h"

namespace hpcrl::io {

struct ConversationFormat {
  std::string reply_open, reply_close;  // around a tool message's content
};

// Sets ex.prompt, ex.response and ex.inserted from `messages`. InputError
// naming `where` (FILE:LINE), the message's index and the fix for any other shape:
// a system message, a second user message, two assistant or two tool messages
// in a row, a conversation that does not end with the assistant, several
// tool_calls in one message.
void read_conversation(const nlohmann::ordered_json& messages, const ConversationFormat& format,
                       const std::string& where, Example& ex);

}  // namespace hpcrl::io
