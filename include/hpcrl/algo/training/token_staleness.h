// How stale the tokens a trainer takes are. A token sampled with weight
// version v (trainer updates done) and trained at version u has staleness
// u − v. Every token of a sample has its own version (a partial rollout
// continues a sample across updates: stages/rollout_stream.h), so staleness is
// counted per token, and async.max_staleness bounds a sample's oldest token: a
// group holding a token staler than the bound is never trained on.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/algo/training/rl_metrics.h"
#include "hpcrl/algo/training/rollout_samples.h"

namespace hpcrl::algo {

// Whether a sample whose tokens have `versions` holds a token staler than
// `max_staleness` when trained at `version` (its oldest token decides; none: no).
bool token_too_stale(const std::vector<int32_t>& versions, int64_t version, int64_t max_staleness);

// Removes every group (`group` consecutive samples) holding a token staler than
// `max_staleness` at `version`; returns the samples removed.
int64_t drop_stale_groups(RolloutSamples& kept, int64_t group, int64_t version, int64_t max_staleness);

// One rank's counts of a batch trained at `version`, summed over the trainer's
// dp ranks as they are: [samples, samples spanning more than one version,
// tokens, Σ token staleness, tokens of staleness 0, 1, …, max_staleness].
std::vector<double> staleness_counts(const RolloutSamples& kept, int64_t version, int64_t max_staleness);

// The largest staleness any counted token has (0 when none).
int64_t max_token_staleness(const std::vector<double>& counts);

// staleness/{mean,max} over tokens, staleness/spanning_samples (share of
// samples sampled by more than one version) and staleness/tokens_<s> (share of
// tokens of staleness s) from summed counts.
void add_staleness_metrics(const std::vector<double>& counts, RlMetrics& m);

}  // namespace hpcrl::algo
