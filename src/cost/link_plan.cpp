// Which ranks calibrate times for each link (link_plan.h).
#include "hpcrl/cost/link_plan.h"

#include <string>

#include "hpcrl/util/error.h"

namespace hpcrl::cost {

LinkPlan plan_link_measures(const std::vector<int>& node_of_rank) {
  LinkPlan p;
  for (size_t r = 0; r < node_of_rank.size(); ++r) {
    const int node = node_of_rank[r];
    if (node < 0 || size_t(node) > p.node_groups.size())
      throw InputError("rank " + std::to_string(r) + " is on node " + std::to_string(node) + " after " +
                       std::to_string(p.node_groups.size()) + " node(s): nodes must be numbered by their lowest rank");
    if (size_t(node) == p.node_groups.size()) p.node_groups.emplace_back();
    p.node_groups[size_t(node)].push_back(int(r));
  }
  if (p.node_groups.empty()) return p;
  const std::vector<int>& first = p.node_groups[0];
  p.gpus_per_node = int(first.size());
  if (first.size() > 1) p.intra_pair = {first[0], first[1]};
  if (p.node_groups.size() > 1) {
    for (const auto& g : p.node_groups) p.node_leaders.push_back(g[0]);
    p.inter_pair = {first[0], p.node_groups[1][0]};
  }
  return p;
}

}  // namespace hpcrl::cost
