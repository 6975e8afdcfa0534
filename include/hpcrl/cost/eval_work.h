// What a stage's held-out evaluations decode, from the config alone: the role they
// evaluate, how many prompts and samples, the token cap, and how many evaluations the
// stage runs (before training, every eval_every steps, at its end). `plan --estimate`
// prices it and `validate` notes a large one (docs/eval.md).
#pragma once

#include <cstdint>
#include <string>

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::cost {

struct EvalWork {
  std::string role;             // the model evaluated (sft: model; grpo/ppo: policy; distill: student)
  int64_t prompts = 0;          // per evaluation; 0 = none (no eval split)
  bool prompts_known = true;    // false: a JSONL eval split read whole (prompts: 0), its size unknown here
  int64_t samples_per_prompt = 1;
  int64_t max_new_tokens = 0;
  int64_t evaluations = 0;      // in the stage, if it runs all its steps
  // Tokens one evaluation may decode at most (every response at the cap).
  int64_t max_tokens_each() const { return prompts * samples_per_prompt * max_new_tokens; }
};

// Evaluations a stage of `steps` steps runs: one before training (eval_before_train), one
// every `eval_every` steps, and one at its end (not twice when the last step is periodic).
int64_t evaluations_in_stage(int64_t steps, int64_t eval_every, bool before_train);

EvalWork eval_work(const config::PipelineConfig& cfg, const config::StageConfig& stage);

// validate's note for a stage whose evaluations decode more than `threshold` tokens each;
// "" otherwise.
std::string eval_note(const config::StageConfig& stage, const EvalWork& w, int64_t threshold = 20000);

}  // namespace hpcrl::cost
