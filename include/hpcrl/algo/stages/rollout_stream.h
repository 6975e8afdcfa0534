// Partial rollouts (async.partial_rollouts): the generator's groups in flight
// from one round to the next. Each round continues every unfinished sample
// with the round's weights and ends, at a host read (Engine::run's pause),
// once enough groups are complete; the first complete groups (oldest drawn
// first) go to the trainer, the others wait, and unfinished samples pause
// until the next round, where they are prefilled afresh (prompt + tokens so
// far) under the weights synced in between. So a long response no longer holds
// its round: the next batch's prompts fill the slots beside it. Every token
// keeps the version of the weights that sampled it (token_staleness.h), and a
// group whose oldest token would be staler than max_staleness when trained is
// dropped before more is spent on it.
//
// A group's draws are keyed by its prompt's global draw position (epoch · size
// + index), so a sample draws the same tokens whichever round continues it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "hpcrl/rollout/engine.h"

namespace hpcrl::algo {

// One prompt's samples, from its draw until every sample is finished.
struct GroupInFlight {
  size_t example = 0;                            // dataset row
  std::vector<int32_t> prompt_ids;
  int64_t key = 0;                               // the prompt's Philox key (its global draw position)
  std::vector<rollout::Sample> samples;          // `group` of them, sample_index = position
  std::vector<std::vector<int32_t>> versions;    // per sample, per token: the version that sampled it
  bool complete() const;
};

class RolloutStream {
 public:
  explicit RolloutStream(int64_t group) : group_(group) {}

  // Groups drawn: `rows[j]`'s prompt `prompt_ids[j]` with key first_key + j.
  void add(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& prompt_ids,
           const std::vector<int64_t>& keys);
  int64_t in_flight() const { return int64_t(groups_.size()); }
  int64_t complete() const;

  // The engine call continuing every unfinished sample (groups oldest first),
  // pausing once `groups` more are complete; its prompts and their keys.
  struct Call {
    std::vector<std::vector<int32_t>> prompts;  // one per unfinished group, oldest first
    std::vector<int64_t> keys;                  // SamplingParams::prompt_keys
    std::vector<size_t> examples;               // each prompt's dataset row
    rollout::GenerationCall call;
    std::vector<size_t> group_of_prompt;        // index into the groups in flight
  };
  Call next_call(int64_t groups) const;
  // The call's samples back: what they generated was sampled with weights `version`.
  void take(const Call& call, rollout::GenerationResult result, int64_t version);

  // The first `n` complete groups in draw order, removed from the stream.
  std::vector<GroupInFlight> take_complete(int64_t n);
  // Removes the groups whose oldest token would be staler than `max_staleness`
  // when trained at `version`; returns the samples removed.
  int64_t drop_stale(int64_t version, int64_t max_staleness);

  // Every group in flight, in draw order (a checkpoint's copy, in_flight.h), and back (groups of this
  // stream's size: RolloutProducer::restore checks a checkpoint's).
  std::vector<GroupInFlight> groups() const { return {groups_.begin(), groups_.end()}; }
  void restore(std::vector<GroupInFlight> groups);

 private:
  const int64_t group_;
  std::deque<GroupInFlight> groups_;  // in draw order
};

}  // namespace hpcrl::algo
