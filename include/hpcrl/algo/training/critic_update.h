// The PPO critic's side of an iteration: its clipped value-loss update over
// the experience's mini-batches and the metrics it reports. Used by the PPO
// stage on the trainer's ranks and, for a critic on ranks of its own, by
// algo/remote/remote_critic.h there.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/algo/training/rollout_samples.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/algo/training/train_step.h"

namespace hpcrl::algo {

// What the critic's steps of one iteration add up (over the grad group after the last).
struct CriticSums {
  double loss = 0;            // Σ micro-batch loss numerators / den
  double clipped_tokens = 0;  // tokens where the clipped value's error is the larger
};

// What the critic's clipped value loss compares its values with: the batch's
// [B, T] loss mask, the values of the rollout (old_values) and the GAE returns.
struct ValueTargets {
  const at::Tensor& mask;
  const at::Tensor& old_values;
  const at::Tensor& returns;
  double clip;  // value_clip; 0 = unclipped
};

// Who updates the critic and how often: the stage, the critic's role and
// trainer, optimizer steps per epoch, and this rank's world rank (for the trainer's messages).
struct CriticTrainer {
  const config::PpoStage& cfg;
  Role& critic;
  Trainer& trainer;
  int64_t n_mini;
  int world_rank;
};

// The critic's cfg.epochs passes over `batch` in mini-batches, one optimizer
// step each (token mean over the mini-batch's global tokens).
CriticSums critic_update(const CriticTrainer& who, const TokenBatch& batch, const ValueTargets& target,
                         int64_t iteration);

// critic/loss and critic/clip_frac from this rank's sums (collective over the
// critic's ranks); `tokens`: the iteration's response tokens over every replica.
std::vector<std::pair<std::string, double>> critic_loss_metrics(const config::PpoStage& cfg, const Role& critic,
                                                                const CriticSums& local, double tokens, int64_t n_mini);

// The iteration's response tokens over the policy's replicas, and the mean old value over them.
double response_tokens(const Role& policy, const at::Tensor& mask);
double values_mean(const Role& policy, const at::Tensor& old_values, const at::Tensor& mask, double tokens);

// InputError naming the stage when the critic has no value head or another dp than the policy.
void check_critic(const StageEnv& env, const Role& policy, const Role& critic);

}  // namespace hpcrl::algo
