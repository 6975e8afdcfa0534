// The training half of collecting a GRPO/PPO iteration, on the policy's ranks:
// the kept samples as one token batch with the old log-probs (the trainer's
// pass, or the engine's when not recomputed), the behaviour log-probs and
// importance-weight metrics of the decoupled objective, the train/inference
// mismatch when measured (logprob_mismatch.h), and the reference's log-probs
// (a forward here, or asked of a reference on ranks of its own).
#pragma once

#include <cstdint>
#include <memory>

#include "hpcrl/algo/stages/policy_plan.h"
#include "hpcrl/algo/training/rl_metrics.h"
#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/algo/training/rollout_samples.h"

namespace hpcrl::algo {

class RemoteReference;

class ExperienceBuilder {
 public:
  explicit ExperienceBuilder(const PolicyStageContext& stage);
  ~ExperienceBuilder();

  // `staleness`: weight updates the trainer has made since the engine sampled
  // `kept` (no mismatch is measured on stale samples). An empty `kept` gets one
  // padding row, as every rank of the dp group takes part in the reductions.
  Experience make(RolloutSamples& kept, int64_t iteration, int64_t staleness, RlMetrics& m);
  // On the ranks of a reference of its own: answers one update's log-prob requests.
  void serve_reference();

 private:
  // `role`'s log-probs of the batch's tokens at the stage's temperature, in the policy's micro-batches.
  at::Tensor logprobs_under(Role& role, const TokenBatch& batch) const;
  // e.old_logp by the plan's source: the engine's, a pass, or left to the update's forward.
  void add_old_logprobs(Experience& e, const at::Tensor& engine_logp, RlMetrics& m);
  // The mismatch of the trainer's log-probs (the pass, a forward of its own, or the update's) with the engine's.
  void add_mismatch(Experience& e, const at::Tensor& engine_logp, RlMetrics& m);
  // Whether iteration `iteration` measures the train/inference mismatch (logprob_mismatch.h):
  // every iteration with an old-log-prob pass, else every logprob_mismatch_every-th; never on stale samples.
  bool measures_mismatch(int64_t iteration, int64_t staleness) const;
  // The mismatch metrics of the batch's response tokens, reduced over the policy's dp group.
  void add_mismatch_metrics(const at::Tensor& trainer_logp, const at::Tensor& engine_logp, const TokenBatch& batch,
                            RlMetrics& m);
  // importance-weight and behaviour-vs-old KL metrics of a decoupled experience.
  void add_offpolicy_metrics(const Experience& e, RlMetrics& m);
  // The experience of a rank with no kept samples: an empty batch that still takes part in the reductions.
  Experience empty(Experience e, int64_t iteration, int64_t staleness, RlMetrics& m);

  const PolicyStageContext& stage_;
  std::unique_ptr<RemoteReference> remote_reference_;  // a reference on ranks of its own
};

}  // namespace hpcrl::algo
