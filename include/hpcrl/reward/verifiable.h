// The verifiable reward of GRPO/PPO on math: 1 when the response's final
// answer equals the gold answer, else 0, plus an optional bonus for the R1
// output format. It is the `type: verifiable` entry of the YAML `rewards:`
//   rewards:
//     math: {type: verifiable, extract: [boxed, answer_tag, last_number], format_bonus: 0.1}
// and the scorer of `hpcrl eval`.
//
// Where the answer is looked for (answer_region): after the last </think> if
// the response has one; nowhere if a <think> was opened and never closed (the
// model ran out of tokens while thinking — an answer guessed from the middle of
// its reasoning would reward rambling); otherwise the whole response.
//
// format_ok: exactly one </think>, at most one <think> and then only at the
// very start (templates such as DeepSeek-R1's open it in the prompt, so it may
// be absent), non-blank thinking, and an answer after </think> that the
// configured extractors find.
//
// score = (correct ? 1 : 0) + (format_ok ? format_bonus : 0).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hpcrl/reward/answer_extract.h"

namespace hpcrl::reward {

struct VerifiableRewardConfig {
  std::vector<Extractor> extract = default_extractors();
  double format_bonus = 0.0;  // ≥ 0; added when format_ok
  double rel_tol = 1e-6;      // numbers_equal's tolerance, in [0, 0.1]
};

struct RewardResult {
  double score = 0.0;
  bool correct = false;
  bool format_ok = false;
  std::string extracted;  // raw extracted answer ("" when none was found)
  std::string extractor;  // name of the extractor that found it ("" when none)
};

// The text that may hold the final answer, or nullopt for an unclosed <think>.
std::optional<std::string> answer_region(const std::string& response);

bool think_format_ok(const std::string& response, const std::vector<Extractor>& order);

class VerifiableReward {
 public:
  // InputError when a field is out of range (names the field and the range).
  explicit VerifiableReward(VerifiableRewardConfig config = {});

  RewardResult score(const std::string& response, const std::string& gold_answer) const;

  const VerifiableRewardConfig& config() const { return config_; }

 private:
  VerifiableRewardConfig config_;
};

}  // namespace hpcrl::reward
