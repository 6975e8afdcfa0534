// One GRPO/PPO iteration's metrics as its parts fill them in (rollout,
// experience, update, critic), written as one metrics.jsonl line by
// PolicyStage::write_metrics; and the timing every part shares: a phase runs
// inside the span "<stage>/<phase>" and its seconds add to seconds/<phase>.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hpcrl/algo/training/rollout_samples.h"

namespace hpcrl::algo {

struct RlMetrics {
  double reward_mean = 0, reward_std = 0, accuracy = 0;
  double response_len_mean = 0, response_len_max = 0;
  double clip_frac = 0, kl = 0, entropy = 0, grad_norm = 0, loss = 0;
  double kept_groups = 0;       // after dynamic sampling
  double sampling_rounds = 0;
  double tokens = 0;            // prompt + response tokens processed this iteration
  double seconds = 0;
  std::vector<std::pair<std::string, double>> seconds_by_span;
  std::vector<std::pair<std::string, double>> extra;  // stage-specific (critic loss, values, ...)
};

// Runs `fn` inside the span "<stage>/<phase>" and adds its seconds to m's seconds/<phase>.
void timed_phase(const std::string& stage, const std::string& phase, RlMetrics& m, const std::function<void()>& fn);

// The iteration's reward, accuracy and length metrics from its rollout totals.
void add_rollout_metrics(const RolloutRound& round, RlMetrics& m);
// Per trajectory of a stage with tools (none without): tools/calls, tools/errors,
// seconds/tool_call, tools/reply_tokens and tools/model_tokens.
void add_tool_metrics(const RolloutSums& totals, RlMetrics& m);

}  // namespace hpcrl::algo
