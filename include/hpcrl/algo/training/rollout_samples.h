// The samples an RL iteration generates, as they travel from the generating
// ranks to the trainer's: token ids with the engine's log-probs, the scores,
// and the iteration's totals over every sample drawn. Plain data, below the
// classes that produce (stages/rollout_producer.h), move
// (remote/sample_transfer.h) and consume them (stages/experience_builder.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::algo {

// The sampled responses of some prompts, before they become an Experience.
struct RolloutSamples {
  std::vector<std::vector<int32_t>> prompt_ids, response_ids;
  std::vector<std::vector<float>> logprobs;  // behaviour log-probs from the engine
  // Per token: the weight version (trainer updates done) that sampled it. One
  // version a sample, except where a partial rollout continued it across an
  // update. Requests to roles on other ranks leave it empty (read as no versions).
  std::vector<std::vector<int32_t>> versions;
  // Per token: 1 sampled by the model, 0 inserted by a multi-turn call (a
  // tool's reply): no loss, KL or entropy term, not counted by any loss_agg
  // (make_token_batch leaves it out of the loss mask). Empty: all sampled.
  std::vector<std::vector<uint8_t>> sampled;
  std::vector<size_t> example;               // dataset index of each sample's prompt
  std::vector<double> scores;
  std::vector<bool> truncated;
  void append(const RolloutSamples& o, size_t first, size_t count);  // samples [first, first+count) of o
  size_t size() const { return scores.size(); }
};

// What every rollout of an iteration adds up on a rank (before dynamic-sampling
// filtering), summed over the policy's dp group for the iteration's metrics.
struct RolloutSums {
  double score = 0;            // Σ reward
  double score_squared = 0;    // Σ reward²
  double samples = 0;
  double correct = 0;          // samples the verifier judged correct
  double response_tokens = 0;
  double tokens = 0;           // prompt + response tokens
  // Multi-turn rollouts (a stage with tools): samples generated with tools, and
  // over them the calls, the failed calls, the calls' seconds (summed; they
  // overlap decoding) and the tokens inserted as replies.
  double tool_samples = 0, tool_calls = 0, tool_errors = 0, tool_seconds = 0, reply_tokens = 0;
};

// One iteration's generation as the generating ranks hand it on: the kept
// samples of this rank's prompts and the totals over every generating replica
// (the same on each), which the iteration's reward and length metrics come from.
struct RolloutRound {
  RolloutSamples kept;
  RolloutSums totals;             // over every sample drawn, before dynamic-sampling filtering
  double max_response_len = 0;    // over every generating replica
  double kept_groups = 0, rounds = 0;
  double dropped_stale = 0;       // samples a partial rollout dropped: their oldest token too stale to train on
  std::vector<std::pair<std::string, double>> seconds_by_span;  // rollout, reward
};

}  // namespace hpcrl::algo
