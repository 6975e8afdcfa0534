// The generating half of a GRPO/PPO iteration, on the generator's ranks: the
// generation copy's weights refreshed as the plan says (a pipelined
// generator's pp = 1 copy; a resharded copy), then rounds of prompts, rollouts
// (rollout::Engine) and rewards (with DAPO's overlong penalty) until enough
// groups are kept (dynamic sampling), and the round's totals over every
// generating replica.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/algo/stages/policy_plan.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/algo/training/rl_metrics.h"
#include "hpcrl/algo/training/rollout_samples.h"
#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/weight_sync.h"

namespace hpcrl::algo {

class RolloutProducer {
 public:
  // `prompts`: null on ranks that neither generate nor evaluate. The engine is built on generating ranks.
  RolloutProducer(const PolicyStageContext& stage, RewardFunction& rewards, const PromptBuilder* prompts,
                  io::DataSampler& sampler);

  // One iteration's rollouts and rewards on the generator's ranks.
  RolloutRound produce(int64_t iteration);
  // The data position back to where the current iteration began (a stop inside its rollout).
  void rewind();

 private:
  // Weights into the generation copy before a rollout, as the plan says; its storage released after.
  void refresh_weights(RlMetrics& m);
  void release_weights();
  // Rounds of rollouts until enough groups are kept (one round without dynamic
  // sampling); every sample drawn adds to `sums` and `max_response_len`.
  RolloutSamples draw_groups(int64_t iteration, RlMetrics& m, RolloutSums& sums, double& max_response_len,
                             double& kept_groups);
  // `cfg.group` samples of each prompt of `p_ids` (round `round` of the iteration).
  std::vector<rollout::Sample> generate(const std::vector<std::vector<int32_t>>& p_ids, int64_t iteration,
                                        int64_t round, RlMetrics& m);
  // The rewards of `samples` (prompts `rows`), with the overlong penalty.
  RolloutSamples score(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                       const std::vector<rollout::Sample>& samples, int64_t iteration, RlMetrics& m,
                       RolloutSums& sums, double& max_response_len);

  const PolicyStageContext& stage_;
  RewardFunction& rewards_;
  const PromptBuilder* prompts_;
  io::DataSampler& sampler_;
  InsideStops generation_stops_;  // rollouts may be abandoned part-way (colocated: every rank generates)
  std::unique_ptr<rollout::Engine> engine_;
  rollout::ReleasedWeights released_;  // kResharded: the generation copy's storage between rollouts
  io::DataCursor iteration_start_;     // the data position when the current iteration began (rewind)
};

}  // namespace hpcrl::algo
