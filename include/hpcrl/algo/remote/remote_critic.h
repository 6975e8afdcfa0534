// A PPO critic on ranks of its own beside a disaggregated stage's trainer
// (placement.ranges.<critic> apart from the policy's and its generation's;
// critic dp = policy dp, so trainer dp group j pairs with critic replica j).
// Each update, the group's leader (tp = sp = pp = 0) sends its rows' ids and
// the replica answers each response token's value (the old values GAE needs);
// after the advantages the leader sends the returns, the critic runs its
// clipped value-loss steps with its own optimizer, and answers critic/loss and
// critic/clip_frac. Values travel per response token, so the two may differ in
// sp. The critic's checkpoint is written with the trainer's (one group over
// both, algo/stages/disaggregated_rl.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hpcrl/algo/training/critic_update.h"

namespace hpcrl::algo {

class RemoteCritic {
 public:
  // Collective over the world (creates the stage's critic communicator).
  RemoteCritic(Role& critic, const Role& trainer, int world_size, const config::PpoStage& cfg, const std::string& stage);

  // On trainer ranks: [B, T] old values of `batch`'s responses (0 elsewhere).
  at::Tensor values(const TokenBatch& batch);
  // On trainer ranks: the critic's update towards `returns` ([B, T]); its loss metrics.
  std::vector<std::pair<std::string, double>> update(const TokenBatch& batch, const at::Tensor& returns);
  // On critic ranks: one iteration's values, then its update with `trainer` (n_mini mini-batches per epoch).
  void serve(Trainer& trainer, int64_t iteration, int64_t n_mini);

 private:
  Role& critic_;
  const Role& trainer_;
  dist::CommPtr comm_;  // every rank; group rank = world rank
  const config::PpoStage& cfg_;
  std::string stage_;
};

}  // namespace hpcrl::algo
