// Weight transfer from a training role to its rollout engine when the two run
// on different ranks (disaggregated placement). A bridge is one communicator
// over the source rank — a training rank that holds the full (gathered)
// weights — and every rollout rank, with the source as group rank 0; weights
// move by broadcast. Colocated roles need no bridge: the weights are local.
#pragma once

#include <string>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/distributed/placement.h"

namespace hpcrl::dist {

class Bridge {
 public:
  // Collective over the world. `source` may lie inside `targets`.
  static Bridge create(int source, const RankRange& targets, const std::string& name);
  // From the first rank of role `from` to every rank of `to` (e.g. "policy" -> "policy.rollout"),
  // named "<from>-><to>".
  static Bridge between(const Placement& placement, const std::string& from, const std::string& to);

  bool is_member() const { return comm_ != nullptr; }
  bool is_source() const { return comm_ && comm_->rank() == 0; }
  int size() const { return comm_ ? comm_->size() : 0; }
  const CommPtr& comm() const { return comm_; }

  // On members: afterwards every member holds the source's `t` (same shape and dtype everywhere).
  void broadcast(at::Tensor& t) const;
  WorkPtr broadcast_async(at::Tensor t) const;

 private:
  CommPtr comm_;
};

}  // namespace hpcrl::dist
