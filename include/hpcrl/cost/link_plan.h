// Which ranks `hpcrl calibrate` times to measure the links of a launch, as data
// (measure_links in src/cli/calibrate.cpp runs whatever this returns): the
// all-reduce over each node's ranks gives the intra-node link a collective sees,
// the all-reduce over one rank per node the inter-node one, and a ping-pong
// between two ranks each link's point-to-point cost (a pipeline send).
#pragma once

#include <utility>
#include <vector>

namespace hpcrl::cost {

struct LinkPlan {
  std::vector<std::vector<int>> node_groups;  // the world ranks of each node, by node
  std::vector<int> node_leaders;              // the lowest rank of each node; empty on one node
  std::pair<int, int> intra_pair{-1, -1};     // rank 0 and the next rank on its node; -1: node 0 has one rank
  std::pair<int, int> inter_pair{-1, -1};     // rank 0 and the lowest rank of node 1; -1: one node
  int gpus_per_node = 1;                      // ranks on node 0
};

// `node_of_rank[r]`: the node index of world rank r, nodes numbered by their lowest rank (so rank 0 is on
// node 0 and a node's index is never above the count of nodes before it), as dist::WorldInfo numbers them.
// InputError when the list breaks that numbering (it would come from a launcher this code does not know).
LinkPlan plan_link_measures(const std::vector<int>& node_of_rank);

}  // namespace hpcrl::cost
