// Getting the trainer's current weights into the model the rollout engine
// generates with, for each placement:
//   colocated, same layout   nothing to do: the engine runs on the trainer's
//                            model object (Engine holds the same shared_ptr)
//   colocated, other layout  reshard_weights(): gather the full tensors over
//                            the training tp/ep groups, load this rank's slices
//                            of the generation layout (e.g. trained at tp=2,
//                            generating at tp=1 on every rank)
//   disaggregated            broadcast_weights(): one training rank sends the
//                            full tensors over a bridge communicator (it is
//                            group rank `root`) to every rollout rank
// Each call is one "weight_sync" span in the trace with the bytes moved.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/decoder_model.h"

namespace hpcrl::rollout {

struct WeightSyncStats {
  int64_t bytes = 0;   // full-tensor bytes this rank received (reshard: gathered; broadcast: over the bridge)
  double seconds = 0;
};

// A generation copy's parameter storage, given back between rollouts so the
// update can use that memory (colocated, other layout): the shapes are kept,
// the storage freed; restore() allocates it again (uninitialised) for the next
// reshard_weights to fill. Precondition: nothing reads the copy in between.
class ReleasedWeights {
 public:
  // Frees every parameter of `model` (no-op when already released).
  void release(model::DecoderModel& model);
  // Allocates them again in their shapes (no-op when not released).
  void restore(model::DecoderModel& model);
  bool released() const { return !shapes_.empty(); }

 private:
  std::vector<std::vector<int64_t>> shapes_;
};

// Collective over `source`'s tp and ep groups: every rank of the training role
// calls it. `target` must have the same architecture (any layout, dtype or
// device); InputError naming the tensor otherwise.
WeightSyncStats reshard_weights(model::DecoderModel& source, model::DecoderModel& target);

// Collective over `bridge`. On group rank `root`, `full` holds the weights to
// send (model::gather_full_weights of the training model: collective over the
// training groups, so every training rank calls that first) and `target` may be
// null. On the other members `full` is ignored and `target` receives the
// weights. The tensor list (names, dtypes, shapes) travels first, so receivers
// need no prior knowledge of the sender's layout.
WeightSyncStats broadcast_weights(dist::Communicator& bridge, int root, const io::NamedTensors* full,
                                  model::DecoderModel* target);

}  // namespace hpcrl::rollout
