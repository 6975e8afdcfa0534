// JSONL datasets: one JSON object per line, e.g. GSM8K's
//   {"question": "...", "answer": "...worked solution...\n#### 72"}
// The defaults load GSM8K as is: prompt = `question`, SFT response = the whole
// `answer` field (the worked solution, "#### 72" included, so the trained
// model ends its solutions the way the `hash` extractor reads them), gold
// answer = the text after the last "####" ("72"). Other files name their keys
// (YAML: `{jsonl: FILE, prompt: problem, answer: solution, response: ...}`).
//
// Every bad row is an InputError naming FILE:LINE (and the column for broken
// JSON), the key, and the fix; nothing is skipped silently except blank lines,
// which are counted in the report.
#pragma once

#include <string>

#include "hpcrl/io/dataset.h"
#include "hpcrl/io/dataset_conversation.h"

namespace hpcrl::io {

struct JsonlOptions {
  std::string prompt_key = "question";
  std::string answer_key = "answer";
  // Key of the SFT target; "" = the answer field's full text.
  std::string response_key;
  // Gold answer = trimmed text after the last marker in the answer field;
  // a field without the marker is the answer as a whole. "" disables.
  std::string answer_marker = "####";
  // Key of a conversation (dataset_conversation.h) read instead of the prompt
  // and response keys; "" = none. With it the answer key is optional (an
  // absent one: no gold answer, so evaluations score nothing).
  std::string messages_key;
  ConversationFormat conversation;
  LengthLimits limits;
};

// Reads and validates the whole file, then applies options.limits.
Dataset load_jsonl(const std::string& path, const JsonlOptions& options = {});

}  // namespace hpcrl::io
