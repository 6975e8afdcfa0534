// The in-memory dataset every stage reads: a list of (prompt, response, gold
// answer) examples plus a report of what loading kept, dropped or cut. JSONL
// files (dataset_jsonl.h) and the synthetic task (synthetic.h) both produce
// it; a stage never knows which.
//
// Length policy (apply_length_limits), in tokens of the caller's tokenizer —
// passed as a plain length function so this file does not depend on one:
//   * prompt longer than max_prompt_tokens  → the example is DROPPED (a cut
//     question no longer has its answer);
//   * response longer than max_response_tokens → DROPPED (policy `filter`, the
//     default: a cut worked solution teaches the model to stop before the
//     answer) or TRUNCATED to the longest prefix that fits (policy `truncate`,
//     the SFT target then has no final answer; the gold answer is kept).
// Every drop and cut is counted in the report and logged; dropping everything
// is an InputError naming the limit.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::io {

struct Example {
  std::string prompt;    // the question, no chat template applied
  std::string response;  // the SFT target (worked solution); may be empty
  std::string answer;    // the gold final answer the reward compares against
  // Byte ranges [first, last) of `response` a tool inserted (a multi-turn
  // trace's replies): in the sequence, but not trained on (SFT masks them).
  std::vector<std::pair<size_t, size_t>> inserted;
  size_t line = 0;       // 1-based line in the source file (0 for generated data)
};

struct DatasetReport {
  size_t rows = 0;                   // examples read or generated
  size_t blank_lines = 0;            // skipped empty lines (JSONL)
  size_t dropped_long_prompt = 0;
  size_t dropped_long_response = 0;
  size_t truncated_response = 0;
  size_t kept = 0;
  std::string note;                  // source-specific remark (e.g. synthetic repeats)

  // One line: "7473 rows, kept 7400; dropped 73 with prompt > 256 tokens; ..."
  std::string summary() const;
};

struct Dataset {
  std::string name;    // for messages: the file path or "synthetic:arithmetic/train"
  std::vector<Example> examples;
  DatasetReport report;

  size_t size() const { return examples.size(); }
  const Example& operator[](size_t i) const { return examples[i]; }
};

// FNV-1a over every example's prompt, response and answer (each ended by a 0 byte): a resumed
// run checks that its data is the data its checkpoint was taken on.
uint64_t content_hash(const Dataset& ds);

enum class LongResponsePolicy { kFilter, kTruncate };

// "filter" | "truncate"; InputError naming `where` otherwise.
LongResponsePolicy parse_long_response_policy(const std::string& name, const std::string& where);

using LengthFn = std::function<size_t(const std::string&)>;

struct LengthLimits {
  size_t max_prompt_tokens = 0;    // 0 = no limit
  size_t max_response_tokens = 0;  // 0 = no limit
  LongResponsePolicy long_response = LongResponsePolicy::kFilter;
  LengthFn length;                 // required when a limit is set (tokens of a text)
};

// Applies the policy above in place, updates ds.report and logs the summary.
void apply_length_limits(Dataset& ds, const LengthLimits& limits);

// The longest prefix of `text` (cut at a UTF-8 character boundary) whose
// length is ≤ max_tokens, by binary search on the length function.
std::string truncate_to_tokens(const std::string& text, size_t max_tokens, const LengthFn& length);

}  // namespace hpcrl::io
