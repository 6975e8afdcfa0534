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
#include "hpcrl/algo/stages/in_flight.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/stages/rollout_stream.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/algo/training/rl_metrics.h"
#include "hpcrl/algo/training/rollout_samples.h"
#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/weight_sync.h"
#include "hpcrl/tools/stage_toolkit.h"

namespace hpcrl::algo {

class RolloutProducer {
 public:
  // `prompts`: null on ranks that neither generate nor evaluate. The engine is built on generating ranks.
  // `tools`: the stage's (null without), its rollouts multi-turn over them.
  RolloutProducer(const PolicyStageContext& stage, RewardFunction& rewards, const PromptBuilder* prompts,
                  io::DataSampler& sampler, const tools::StageToolkit* tools);

  // One iteration's rollouts and rewards on the generator's ranks, sampled with
  // weight version `version` (trainer updates done).
  RolloutRound produce(int64_t iteration, int64_t version);
  // The data position back to where the current iteration began (a stop inside its rollout).
  void rewind();
  // A generating rank between iterations: its data position and groups in flight (in_flight.h), and back
  // (InputError naming `where` for groups the stage cannot continue).
  GeneratorSnapshot snapshot() const;
  void restore(GeneratorSnapshot snapshot, const std::string& where);

 private:
  // Weights into the generation copy before a rollout, as the plan says; its storage released after.
  void refresh_weights(RlMetrics& m);
  void release_weights();
  // What an iteration adds up on this rank: the scored samples' sums and longest response, and the samples
  // partial rollouts dropped as too stale to train on.
  struct Tally {
    RolloutSums sums;
    double max_response_len = 0;
    double dropped_stale = 0;  // partial rollouts: samples dropped as too stale to train on
  };
  // Rounds of rollouts until enough groups are kept (one round without dynamic
  // sampling); every sample drawn adds to the tally. Sets m.sampling_rounds.
  RolloutSamples draw_groups(int64_t iteration, int64_t version, RlMetrics& m, Tally& tally);
  // Partial rollouts: the stream's groups continued until enough are complete
  // and kept; the first `local` complete groups of each engine call are scored.
  RolloutSamples continue_groups(int64_t iteration, int64_t version, RlMetrics& m, Tally& tally);
  // Draws whole batches until two iterations' groups are in flight on every replica (the same draws on each).
  void draw_ahead(int64_t local);
  // One engine call over the stream's unfinished samples, pausing after `groups` more are complete.
  void continue_samples(int64_t groups, int64_t iteration, int64_t version, RlMetrics& m, Tally& tally);
  // Whether a group's samples all scored alike (no learning signal: dynamic sampling skips it).
  bool uninformative(const RolloutSamples& round, size_t first) const;
  // The sums of kept groups over every replica, and whether to draw again.
  bool enough_kept(int64_t kept_groups, int64_t rounds, double& kept_total) const;
  // `cfg.group` samples of each prompt of `p_ids` (round `round` of the iteration).
  std::vector<rollout::Sample> generate(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                                        int64_t iteration, int64_t round, RlMetrics& m, Tally& tally);
  // The group samples of every prompt (dataset rows `rows`), multi-turn over the stage's tools (their counts into
  // the tally).
  std::vector<rollout::Sample> generate_with_tools(const std::vector<size_t>& rows,
                                                   const std::vector<std::vector<int32_t>>& p_ids,
                                                   const rollout::SamplingParams& sampling, const std::string& name,
                                                   Tally& tally);
  // What an environment's reset tells it of dataset rows `rows` (their prompts and answers).
  std::vector<tools::EpisodeStart> episodes(const std::vector<size_t>& rows) const;
  // The rewards of `samples` (prompts `rows`), with the overlong penalty.
  RolloutSamples score(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                       const std::vector<rollout::Sample>& samples, int64_t iteration, RlMetrics& m, Tally& tally);
  // score() of whole groups, each token with its version.
  RolloutSamples score_groups(std::vector<GroupInFlight> groups, int64_t iteration, RlMetrics& m, Tally& tally);

  const PolicyStageContext& stage_;
  RewardFunction& rewards_;
  const PromptBuilder* prompts_;
  io::DataSampler& sampler_;
  InsideStops generation_stops_;  // rollouts may be abandoned part-way (colocated: every rank generates)
  std::unique_ptr<rollout::Engine> engine_;
  rollout::ReleasedWeights released_;  // kResharded: the generation copy's storage between rollouts
  io::DataCursor iteration_start_;     // the data position when the current iteration began (rewind)
  std::unique_ptr<RolloutStream> stream_;  // async.partial_rollouts: the groups in flight
  const tools::StageToolkit* tools_;  // a stage with tools: multi-turn rollouts
};

}  // namespace hpcrl::algo
