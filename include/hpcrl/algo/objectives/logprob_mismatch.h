// The train/inference mismatch of a GRPO/PPO iteration (NeMo-RL's
// gen_kl_error): the log-probs the rollout engine reported for the tokens it
// sampled against the trainer's forward over the same tokens with the same
// weights, over the response tokens of the batch (prompt and padding
// excluded). With r = logp_train - logp_engine per token:
//   mismatch/logprob_abs_mean = Σ|r| / tokens
//   mismatch/logprob_abs_max  = max |r|
//   mismatch/kl               = Σ (exp(r) - 1 - r) / tokens
// the last the k3 estimator of KL(π_engine ‖ π_train) (the tokens are the
// engine's samples), unclamped, in float64. Summed (max-reduced) over the
// data-parallel group, so every rank logs the same figures.
//
// Where the trainer computes its old log-probs anyway (recompute_old_logprobs,
// which the decoupled objective implies) those are the trainer's side, every
// iteration: the old-log-prob pass, or the update's own forward when the batch
// takes one optimizer step (stages/actor_update.cpp sums them there); otherwise a forward of its own runs every
// `logprob_mismatch_every` iterations (config: 0 = never). See docs/tracing.md.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

// What a rank adds up over its response tokens (summed over the dp group).
struct MismatchSums {
  double abs_diff = 0;  // Σ |r|
  double kl = 0;        // Σ exp(r) - 1 - r
  double tokens = 0;    // response tokens
};

// The iteration's figures, the same on every rank of the group.
struct LogprobMismatch {
  double abs_mean = 0, abs_max = 0, kl = 0, tokens = 0;
};

// This rank's sums over the tokens where `mask` is 1 ([B, T] each, any float
// dtype, one device); `abs_max` gets the largest |r| there (0 without tokens).
MismatchSums mismatch_sums(const at::Tensor& trainer_logp, const at::Tensor& engine_logp, const at::Tensor& mask,
                           double& abs_max);

// The figures of sums already reduced and their largest |r|.
LogprobMismatch mismatch_of(const MismatchSums& total, double abs_max);

// The figures over `dp` (sums added, maxima max-reduced; null or one rank:
// this rank's own). Collective over dp.
LogprobMismatch reduce_mismatch(const MismatchSums& local, double local_abs_max, const dist::CommPtr& dp);

// Whether iteration `iteration` (0-based) runs a trainer forward for the
// mismatch alone, the trainer having no old-log-prob pass of its own: every
// `every`-th iteration from the first (0 = never).
bool mismatch_pass_due(int64_t iteration, int64_t every);

// The metrics of the figures, by the names above.
std::vector<std::pair<std::string, double>> mismatch_metrics(const LogprobMismatch& m);

}  // namespace hpcrl::algo
