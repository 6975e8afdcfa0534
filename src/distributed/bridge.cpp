// The train -> rollout weight bridge (see bridge.h).
#include "hpcrl/distributed/bridge.h"

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/check.h"

namespace hpcrl::dist {

Bridge Bridge::create(int source, const RankRange& targets, const std::string& name) {
  std::vector<int> members{source};
  for (int r = targets.first; r <= targets.last; ++r)
    if (r != source) members.push_back(r);
  Bridge b;
  b.comm_ = new_group(members, name);
  return b;
}

Bridge Bridge::between(const Placement& placement, const std::string& from, const std::string& to) {
  return create(placement.range(from).first, placement.range(to), from + "->" + to);
}

void Bridge::broadcast(at::Tensor& t) const {
  HPCRL_CHECK(comm_, "Bridge::broadcast called on a rank outside the bridge; check is_member() first");
  comm_->broadcast(t, 0);
}

WorkPtr Bridge::broadcast_async(at::Tensor t) const {
  HPCRL_CHECK(comm_, "Bridge::broadcast_async called on a rank outside the bridge; check is_member() first");
  return comm_->broadcast_async(std::move(t), 0);
}

}  // namespace hpcrl::dist
