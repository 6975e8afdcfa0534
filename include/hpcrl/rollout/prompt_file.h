// The input of `hpcrl generate`: a JSONL file with one request per line, each
// an object holding exactly one of
//   {"prompt": "text"}                 raw text, encoded with the tokenizer's
//                                      own special tokens (e.g. a BOS)
//   {"messages": [{"role", "content"}, ..]}  rendered with the chat template
//                                      plus the assistant's generation prompt
//   {"prompt_ids": [1, 2, 3]}          token ids as they are
// Other keys (ids, answers, metadata) are ignored. Blank lines are skipped.
// Every problem is an InputError naming FILE:LINE and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/config/enums.h"
#include "hpcrl/io/tokenizer.h"

namespace hpcrl::rollout {

struct PromptRequest {
  std::string text;          // the prompt as text (rendered template; decoded ids for prompt_ids)
  std::vector<int32_t> ids;  // what the model sees
  int64_t line = 0;          // 1-based line in the file
};

struct PromptFile {
  std::vector<PromptRequest> prompts;
  bool chat = false;  // some line used a chat template other than "none"
};

// chat_template: `model` (the one the tokenizer declares; `hpcrl generate
// --chat-template auto`) or a fixed renderer (none, chatml, qwen3, llama3).
// vocab_size bounds prompt_ids.
PromptFile read_prompt_file(const std::string& path, const io::Tokenizer& tokenizer, int64_t vocab_size,
                            config::ChatTemplate chat_template = config::ChatTemplate::model);

// The ids that end a generation: the tokenizer's EOS and, for chat prompts, the
// end-of-turn token of the ChatML and Llama-3 formats when the vocabulary has it.
std::vector<int32_t> stop_token_ids(const io::Tokenizer& tokenizer, bool chat);

}  // namespace hpcrl::rollout
