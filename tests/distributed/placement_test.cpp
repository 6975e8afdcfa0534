// Placement of roles on rank ranges: colocated and disaggregated lookups, the
// rollout fallback, and the errors for overlapping, out-of-world, inverted and
// missing ranges (exact messages: users read them).
#include <gtest/gtest.h>

#include "hpcrl/distributed/placement.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(Placement, ColocatedGivesEveryRoleTheWorld) {
  Placement p = Placement::colocated(8);
  EXPECT_EQ(p.mode(), Placement::Mode::kColocated);
  EXPECT_EQ(p.range("policy"), (RankRange{0, 7}));
  EXPECT_EQ(p.range("policy.rollout"), (RankRange{0, 7}));
  EXPECT_EQ(p.range("critic"), (RankRange{0, 7}));
  EXPECT_TRUE(p.is_member("reference", 7));
  EXPECT_TRUE(p.has("anything"));
}

TEST(Placement, DisaggregatedRangesAndRolloutFallback) {
  Placement p = Placement::disaggregated(12, {{"policy", {0, 3}}, {"policy.rollout", {4, 7}}, {"critic", {8, 11}}});
  EXPECT_EQ(p.range("policy"), (RankRange{0, 3}));
  EXPECT_EQ(p.range("policy.rollout"), (RankRange{4, 7}));
  EXPECT_EQ(p.range("critic"), (RankRange{8, 11}));
  EXPECT_EQ(p.range("critic.rollout"), (RankRange{8, 11}));  // no own range: runs on the critic's ranks
  EXPECT_EQ(p.range("policy").size(), 4);
  EXPECT_TRUE(p.is_member("policy.rollout", 5));
  EXPECT_FALSE(p.is_member("policy", 5));
  EXPECT_TRUE(p.has("critic.rollout"));
  EXPECT_FALSE(p.has("student"));
}

TEST(Placement, OverlappingRangesAreRejected) {
  EXPECT_EQ(error_of([] { Placement::disaggregated(8, {{"policy", {0, 4}}, {"policy.rollout", {4, 7}}}); }),
            "placement.ranges policy: [0, 4] and policy.rollout: [4, 7] partly overlap; give the two roles the same "
            "range (they take turns on it) or disjoint ones");
}

TEST(Placement, ARangeSharedExactlyIsAccepted) {
  // veRL's layout: the reference on its policy's trainer ranks, generation beside them.
  Placement p = Placement::disaggregated(4, {{"policy", {0, 1}}, {"reference", {0, 1}}, {"policy.rollout", {2, 3}}});
  EXPECT_EQ(p.range("reference"), p.range("policy"));
  EXPECT_EQ(p.range("policy.rollout"), (RankRange{2, 3}));
}

TEST(Placement, RangesPastTheWorldAreRejected) {
  EXPECT_EQ(error_of([] { Placement::disaggregated(8, {{"policy", {0, 3}}, {"policy.rollout", {4, 9}}}); }),
            "placement.ranges.policy.rollout: [4, 9] reaches past the world of 8 ranks (0-7); launch at least 10 "
            "ranks or shrink the range");
}

TEST(Placement, InvertedAndNegativeRangesAreRejected) {
  EXPECT_EQ(error_of([] { Placement::disaggregated(8, {{"policy", {3, 1}}}); }),
            "placement.ranges.policy: [3, 1] is not a range: use [first, last] with 0 <= first <= last (both "
            "inclusive)");
  EXPECT_NE(error_of([] { Placement::disaggregated(8, {{"policy", {-1, 1}}}); }).find("[-1, 1] is not a range"),
            std::string::npos);
  EXPECT_NE(error_of([] { Placement::disaggregated(8, {}); }).find("placement.ranges is empty"), std::string::npos);
}

TEST(Placement, MissingRoleSuggestsTheClosestName) {
  Placement p = Placement::disaggregated(8, {{"policy", {0, 3}}, {"critic", {4, 7}}});
  EXPECT_EQ(error_of([&] { p.range("polcy"); }),
            "placement.ranges has no range for 'polcy' (did you mean 'policy'?); disaggregated placement needs one "
            "per role, e.g. polcy: [first, last]. Given: critic, policy");
}

}  // namespace
}  // namespace hpcrl::dist
