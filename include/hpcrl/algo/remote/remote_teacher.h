// A distillation teacher on ranks of its own (placement.ranges.<teacher>
// apart from the student's; teacher dp = student dp, so student dp group j
// pairs with teacher replica j). Each step, the group's leader sends its rows'
// prompt and response ids; the replica builds the batch in its own layout,
// computes its top-k (algo/objectives/teacher_topk.h) and its leader sends each response
// token's k ids and log-probs back to every rank of the group, which lays them
// out [B, T, k] for its own batch (zeros off the responses, where the loss
// mask is 0). Sequence-level distillation (the teacher generates) is not
// served this way: validation refuses it.
#pragma once

#include <string>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/objectives/teacher_topk.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

class RemoteTeacher {
 public:
  // Collective over the world (creates the stage's teacher communicator). k: ids per token (≤ the vocabulary).
  RemoteTeacher(Role& teacher, const Role& student, int world_size, int64_t k, const config::TrainHparams& train,
                double temperature);

  // On student ranks: the teacher's top-k of `batch`.
  TopK topk(const TokenBatch& batch);
  // On teacher ranks: answers one step's request.
  void serve();

 private:
  Role& teacher_;
  const Role& student_;
  dist::CommPtr comm_;  // every rank; group rank = world rank
  int64_t k_;
  MicroBatchOptions micro_;
  double temperature_;
};

}  // namespace hpcrl::algo
