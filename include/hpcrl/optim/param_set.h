// The trainable parameters of one model replica on this rank, with what the
// optimizer and the gradient-norm need to know about their distribution: a
// parameter either is a shard (split over tp or ep, so norms add up across
// that group) or a full copy replicated over it (counted once).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace hpcrl::optim {

enum class Sharding {
  kReplicated,  // identical on every tp rank (norm weights, replicated kv heads)
  kTensor,      // a tp shard (column/row/vocab-parallel weights)
  kExpert,      // an ep shard (this rank's experts)
};

struct Param {
  std::string name;   // HF tensor name (checkpoint key)
  at::Tensor tensor;  // requires_grad leaf
  Sharding sharding = Sharding::kReplicated;
  // Identical copies of this shard inside its group (e.g. kv-head chunks fewer
  // than tp ranks): the norm divides its squared sum by this.
  int64_t replicas = 1;
};

using ParamSet = std::vector<Param>;

}  // namespace hpcrl::optim
