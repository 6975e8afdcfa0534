// An RL iteration's metrics and phase timing (rl_metrics.h).
#include "hpcrl/algo/training/rl_metrics.h"

#include <algorithm>
#include <cmath>

#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

void timed_phase(const std::string& stage, const std::string& phase, RlMetrics& m, const std::function<void()>& fn) {
  double seconds = 0;
  {
    trace::TimedSpan span(stage + "/" + phase);
    fn();
    seconds = span.elapsed_seconds();
  }
  for (auto& [k, v] : m.seconds_by_span)
    if (k == phase) return void(v += seconds);
  m.seconds_by_span.emplace_back(phase, seconds);
}

void add_rollout_metrics(const RolloutRound& round, RlMetrics& m) {
  const RolloutSums& tot = round.totals;
  const double n = std::max(1.0, tot.samples);
  m.reward_mean = tot.score / n;
  m.reward_std = std::sqrt(std::max(0.0, tot.score_squared / n - m.reward_mean * m.reward_mean));
  m.accuracy = tot.correct / n;
  m.response_len_mean = tot.response_tokens / n;
  m.response_len_max = round.max_response_len;
  m.tokens = tot.tokens;
  m.kept_groups = round.kept_groups;
  m.sampling_rounds = round.rounds;
  for (const auto& [k, v] : round.seconds_by_span) m.seconds_by_span.emplace_back(k, v);
  add_tool_metrics(tot, m);
}

void add_tool_metrics(const RolloutSums& tot, RlMetrics& m) {
  if (tot.tool_samples <= 0) return;
  const double n = tot.tool_samples;
  m.extra.emplace_back("tools/calls", tot.tool_calls / n);  // per trajectory
  m.extra.emplace_back("tools/errors", tot.tool_errors / n);
  m.extra.emplace_back("seconds/tool_call", tot.tool_seconds / std::max(1.0, tot.tool_calls));
  m.extra.emplace_back("tools/reply_tokens", tot.reply_tokens / n);
  m.extra.emplace_back("tools/model_tokens", (tot.response_tokens - tot.reply_tokens) / n);
}

}  // namespace hpcrl::algo
