// Held-out evaluation shared by every stage: mean token loss of the reference
// responses (teacher forcing) and accuracy of the model's own answers under the
// stage's evaluation sampling (greedy by default), scored by the reward's
// verifier. Examples are split over the role's dp ranks and the totals summed.
// It says what it does: a line when it starts (prompts, samples, token cap) and a
// progress line at most every 10 s, like training's.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/io/dataset.h"
#include "hpcrl/reward/verifiable.h"
#include "hpcrl/tools/stage_toolkit.h"
#include "hpcrl/trace/metrics.h"

namespace hpcrl::algo {

struct EvalResult {
  double loss = 0;       // mean NLL per response token (reference responses)
  double accuracy = 0;   // fraction of samples the verifier marks correct
  double response_len = 0;
  int64_t examples = 0;
  double seconds = 0;
  // Per example in [0, examples): how many of its n samples were correct (pass@k, algo/stages/pass_at_k.h).
  std::vector<int64_t> correct_per_example;
  // The first kEvalSamplesKept generations of dp rank 0's examples, for eval_samples.jsonl.
  std::vector<trace::SampleLine> samples;
};

// Generations an evaluation keeps for the report (eval_samples.jsonl).
inline constexpr size_t kEvalSamplesKept = 4;

struct EvalOptions {
  int64_t prompts = 0;   // 0 = the whole split
  int64_t n = 1;
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t max_new_tokens = 256;
  int64_t batch = 64;
  uint64_t seed = 0;
  bool loss = true;      // also compute teacher-forced loss (needs responses)
  // Where a stop may cut the evaluation short (between batches and decode steps;
  // StepAbandoned); null: it runs to the end.
  const InsideStops* stops = nullptr;
  // A stage with tools evaluates multi-turn over them (its rollouts' tools); null: single-turn.
  const tools::StageToolkit* tools = nullptr;
};

// Collective over the role's ranks (over the world with options.stops enabled,
// which needs the role to span it). An allocation that fails inside becomes a
// RuntimeError naming run.eval_sampling's sizes (not the training batch's).
EvalResult evaluate(Role& role, const io::Dataset& eval, const PromptBuilder& prompts,
                    const reward::VerifiableReward& verifier, const EvalOptions& options);

// Sum of masked NLL and token count of a batch (no grad); used by eval and tests.
// `sampled` (as make_token_batch): inserted tokens are left out of the loss.
std::pair<double, int64_t> batch_nll(Role& role, const std::vector<std::vector<int32_t>>& prompt_ids,
                                     const std::vector<std::vector<int32_t>>& response_ids,
                                     const std::vector<std::vector<uint8_t>>* sampled = nullptr);

}  // namespace hpcrl::algo
