// A reference model on ranks of its own beside a disaggregated stage's trainer
// (placement.ranges.<reference> apart from the policy's and its generation's).
// Each update, every trainer dp group's leader (tp = sp = pp = 0) sends its
// rows' prompt and response ids to reference replica j mod dp_ref; the replica
// builds the batch in its own layout, computes the log-probs and its leader
// sends each row's response values back to every rank of the group, which
// scatters them into its [B, T] layout. Values travel per response token, so
// trainer and reference may differ in sp (and so in the padded length T).
#pragma once

#include <memory>
#include <vector>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/rollout_samples.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

class RemoteReference {
 public:
  // Collective over the world (creates the stage's reference communicator).
  RemoteReference(Role& reference, const Role& trainer, int world_size, const config::TrainHparams& train,
                  double temperature, const std::string& stage);

  // On trainer ranks: [B, T] reference log-probs of `kept`, aligned with `batch`.
  at::Tensor logprobs(const RolloutSamples& kept, const TokenBatch& batch);
  // On reference ranks: answers one update's requests (every trainer dp group this replica serves).
  void serve();

 private:
  Role& reference_;
  const Role& trainer_;
  dist::CommPtr comm_;  // every rank; group rank = world rank
  MicroBatchOptions micro_;
  double temperature_;
  std::string stage_;
};

// The reference is on ranks of its own, apart from the trainer's.
inline bool on_own_ranks(const Role& reference, const Role& trainer) {
  return reference.mesh.first_rank() != trainer.mesh.first_rank();
}

}  // namespace hpcrl::algo
