// Offline scoring for `hpcrl eval --responses FILE.jsonl`: no model, no MPI
// work — every line's response is scored by the verifiable reward against its
// gold answer. Lines are what `hpcrl generate` writes plus an "answer" field:
//   {"prompt_index": 0, "sample_index": 1, "response": "... \\boxed{12}", "answer": "12", ...}
// Only "response" (string) and "answer" (string or number; GSM8K's "... #### 72"
// gives 72, as in datasets) are required. "prompt_index" (integer ≥ 0), when
// every line has it, groups the samples of one prompt for pass@k; without it
// each line is its own prompt. Blank lines are skipped; anything else that is
// not such an object is an InputError naming FILE:LINE (and the column of
// broken JSON) and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/algo/stages/pass_at_k.h"
#include "hpcrl/reward/verifiable.h"

namespace hpcrl::cli {

struct ScoredLine {
  int64_t line = 0;          // 1-based line in the file
  int64_t prompt_index = 0;  // the line's group (its own index among lines without prompt_index)
  double score = 0;          // the reward: correct + format bonus
  bool correct = false;
  std::string extracted;     // answer the extractors found ("" = none)
  std::string extractor;     // which one found it ("" = none)
};

struct ScoredResponses {
  std::vector<ScoredLine> lines;             // file order
  std::vector<algo::SampleCounts> prompts;   // one per prompt_index, ascending
  double mean_score = 0;
};

ScoredResponses score_responses(const std::string& path, const reward::VerifiableReward& verifier,
                                const std::string& answer_marker);

}  // namespace hpcrl::cli
