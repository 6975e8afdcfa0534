// Which ranks calibrate times for each link: node groups, one leader per node,
// and the two ping-pong pairs, for the rank placements launchers produce.
#include <gtest/gtest.h>

#include "hpcrl/cost/link_plan.h"
#include "hpcrl/util/error.h"

namespace hpcrl::cost {
namespace {

using Groups = std::vector<std::vector<int>>;
using Pair = std::pair<int, int>;

TEST(LinkPlan, OneRankMeasuresNoLink) {
  const LinkPlan p = plan_link_measures({0});
  EXPECT_EQ(p.node_groups, (Groups{{0}}));
  EXPECT_EQ(p.intra_pair, (Pair{-1, -1}));
  EXPECT_EQ(p.inter_pair, (Pair{-1, -1}));
  EXPECT_TRUE(p.node_leaders.empty());
  EXPECT_EQ(p.gpus_per_node, 1);
}

TEST(LinkPlan, OneNodeTimesItsRanksAndNoInterNodeLink) {
  const LinkPlan p = plan_link_measures({0, 0, 0, 0});
  EXPECT_EQ(p.node_groups, (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(p.intra_pair, (Pair{0, 1}));
  EXPECT_EQ(p.inter_pair, (Pair{-1, -1}));
  EXPECT_TRUE(p.node_leaders.empty());
  EXPECT_EQ(p.gpus_per_node, 4);
}

TEST(LinkPlan, TwoNodesInBlocksPairRankZeroWithItsNeighbourAndWithNodeOne) {
  // srun's block placement, 2 nodes × 2: ranks 0, 1 on node 0 and 2, 3 on node 1.
  const LinkPlan p = plan_link_measures({0, 0, 1, 1});
  EXPECT_EQ(p.node_groups, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(p.node_leaders, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.intra_pair, (Pair{0, 1}));
  EXPECT_EQ(p.inter_pair, (Pair{0, 2}));
  EXPECT_EQ(p.gpus_per_node, 2);
}

TEST(LinkPlan, RoundRobinPlacementPairsByNodeNotByRankNumber) {
  // mpirun --map-by node: ranks alternate between the nodes, so rank 1 is the other node's.
  const LinkPlan p = plan_link_measures({0, 1, 0, 1, 0, 1});
  EXPECT_EQ(p.node_groups, (Groups{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(p.node_leaders, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.intra_pair, (Pair{0, 2}));
  EXPECT_EQ(p.inter_pair, (Pair{0, 1}));
  EXPECT_EQ(p.gpus_per_node, 3);
}

TEST(LinkPlan, NodesNotNumberedByTheirLowestRankAreRefused) {
  try {
    plan_link_measures({1, 0});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 0 is on node 1 after 0 node(s): nodes must be numbered by their lowest rank");
  }
}

}  // namespace
}  // namespace hpcrl::cost
