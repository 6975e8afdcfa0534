// The GRPO/PPO actor update on the policy's ranks: cfg.epochs passes over an
// iteration's experience in mini-batches, one optimizer step each, the
// policy loss (policy_loss.h) normalised by the mini-batch's global
// denominator, and the update's clip fraction, KL, entropy, loss and
// gradient norm summed over the policy's ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/algo/objectives/logprob_mismatch.h"
#include "hpcrl/algo/objectives/offpolicy_weights.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/stages/policy_plan.h"
#include "hpcrl/algo/training/rl_metrics.h"
#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/algo/training/train_step.h"

namespace hpcrl::algo {

// What the actor's mini-batch steps of one iteration add up on a rank, summed
// over the policy's ranks after the last (sum_step_sums).
struct ActorUpdateSums {
  double clipped_tokens = 0;  // Σ clip fraction · tokens, per micro-batch
  double kl_tokens = 0;       // Σ KL · tokens
  double entropy_tokens = 0;  // Σ entropy · tokens
  double tokens = 0;
  double loss = 0;            // Σ micro-batch loss numerators / den
  // When the update's forward is π_old (Experience::old_from_update), over the batch's response
  // tokens: the decoupled objective's importance weights and the mismatch with the engine's log-probs.
  OffpolicySums offpolicy;
  MismatchSums mismatch;
};

// The maxima of the same figures (max-reduced over the policy's ranks).
struct ActorUpdatePeaks {
  double iw = 0, mismatch_abs = 0;
};

struct ActorMicroBatch;  // one micro-batch's per-token inputs (actor_update.cpp)

class ActorUpdate {
 public:
  explicit ActorUpdate(const PolicyStageContext& stage) : stage_(stage) {}

  // Optimizer steps per epoch: prompts·group over mini_batch (at least one).
  int64_t minibatches_per_epoch() const;
  // cfg.epochs passes over minibatches_per_epoch() mini-batches; fills m's update metrics.
  void update(const Experience& exp, Trainer& trainer, const PolicyLossConfig& pl, int64_t iteration, RlMetrics& m);

 private:
  // What every mini-batch step of one update reads: the experience, the loss
  // mask the actor trains on, the trainer and the loss's settings.
  struct UpdateInputs {
    const Experience& exp;
    const at::Tensor& mask;
    Trainer& trainer;
    const PolicyLossConfig& pl;
  };
  // One optimizer step of the actor on experience rows [lo, hi); adds to `sums` and `peaks`.
  double actor_step(const UpdateInputs& in, int64_t lo, int64_t hi, int64_t step, ActorUpdateSums& sums,
                    ActorUpdatePeaks& peaks);
  // The micro-batches of rows [lo, hi) with their per-token inputs in this rank's layout.
  void cut_micro_batches(const UpdateInputs& in, int64_t lo, int64_t hi, const at::Tensor& weights,
                         const at::Tensor& rows, std::vector<TokenBatch>& shards,
                         std::vector<ActorMicroBatch>& inputs) const;
  // The importance-weight and mismatch metrics of an update whose forward was π_old (collective).
  void add_update_forward_metrics(const Experience& exp, const ActorUpdateSums& tot, ActorUpdatePeaks peaks,
                                  RlMetrics& m) const;

  const PolicyStageContext& stage_;
};

}  // namespace hpcrl::algo
