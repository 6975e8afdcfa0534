// Communicators built from a role's mesh and placement, on real MPI ranks:
// every group kind has exactly the mesh's members in mesh order, reduces over
// them, pp neighbours exchange activations, ranks outside a disaggregated role
// get no communicators, and the train -> rollout bridge carries weights.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "distributed/comm_test_util.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/bridge.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/distributed/placement.h"

namespace hpcrl::dist {
namespace {

using testing::same;
using testing::world_comm_for_test;

// Layouts over the whole world for 2 and 4 ranks, with ep and pp in play.
std::vector<ParallelSizes> layouts_for(int n) {
  if (n == 2) return {{2, 1, 1, 0, 1}, {1, 1, 2, 0, 1}, {1, 2, 2, 0, 1}, {1, 1, 1, 0, 2}};
  return {{2, 1, 2, 0, 1}, {1, 2, 2, 0, 2}, {2, 1, 1, 0, 2}, {1, 1, 4, 0, 1}, {1, 2, 1, 2, 1}};
}

TEST(MeshComms, EveryGroupMatchesTheMeshAndReducesOverIt) {
  auto world = world_comm_for_test();
  const int n = world->size(), me = world->rank();
  for (const auto& sizes : layouts_for(n)) {
    Mesh mesh(sizes, 0, n, "policy");
    SCOPED_TRACE(mesh.describe());
    MeshComms comms = create_mesh_comms(mesh);
    ASSERT_TRUE(comms.is_member());
    for (GroupKind kind : kAllGroupKinds) {
      const CommPtr& c = comms.get(kind);
      ASSERT_NE(c, nullptr) << group_name(kind);
      const std::vector<int>& members = mesh.group_of(kind, me);
      EXPECT_EQ(c->world_ranks(), members) << group_name(kind);
      EXPECT_EQ(c->name(), std::string("policy/") + group_name(kind) + "[" +
                               std::to_string(mesh.group_index(kind, me)) + "]");
      EXPECT_EQ(members[c->rank()], me);
      at::Tensor t = at::full({3}, me, at::kLong);
      c->all_reduce(t, ReduceOp::kSum);
      int64_t want = 0;
      for (int r : members) want += r;
      EXPECT_TRUE(same(t, at::full({3}, want, at::kLong))) << group_name(kind);
    }
    // Group ranks follow the coordinates: tp rank = tp, pp rank = pp, ep rank = ep.
    MeshCoord c = mesh.coord(me);
    EXPECT_EQ(comms.tp->rank(), c.tp);
    EXPECT_EQ(comms.sp->rank(), c.sp);
    EXPECT_EQ(comms.dp->rank(), c.dp);
    EXPECT_EQ(comms.pp->rank(), c.pp);
    EXPECT_EQ(comms.ep->rank(), c.ep);
    EXPECT_EQ(comms.edp->rank(), c.edp);
    EXPECT_EQ(comms.dp_sp->rank(), c.sp + sizes.sp * c.dp);
  }
}

TEST(MeshComms, PipelineNeighboursExchangeActivations) {
  auto world = world_comm_for_test();
  const int n = world->size(), me = world->rank();
  Mesh mesh({1, 1, 1, 0, n}, 0, n, "policy");  // one stage per rank
  MeshComms comms = create_mesh_comms(mesh);
  at::Tensor act = at::full({64, 8}, 0.f);
  if (!mesh.is_first_stage(me)) comms.pp->recv(act, comms.pp->rank() - 1, 0);
  EXPECT_TRUE(same(act, at::full({64, 8}, static_cast<float>(mesh.coord(me).pp * (mesh.coord(me).pp - 1) / 2))));
  act += mesh.coord(me).pp;  // stage k adds k: the last stage holds 0 + 1 + ... + (pp-1)
  if (!mesh.is_last_stage(me)) comms.pp->send(act, comms.pp->rank() + 1, 0);
  EXPECT_EQ(mesh.pp_next(me), mesh.is_last_stage(me) ? -1 : me + 1);
}

TEST(Placement, DisaggregatedRolesOnlyOnTheirRanksAndTheBridgeCarriesWeights) {
  auto world = world_comm_for_test();
  const int n = world->size(), me = world->rank(), half = n / 2;
  Placement placement = Placement::disaggregated(n, {{"policy", {0, half - 1}}, {"policy.rollout", {half, n - 1}}});
  RankRange train = placement.range("policy"), gen = placement.range("policy.rollout");
  Mesh train_mesh({half, 1, 1, 0, 1}, train.first, train.size(), "policy");         // tp over the train ranks
  Mesh gen_mesh({1, 1, 1, 0, 1}, gen.first, gen.size(), "policy.rollout");          // dp over the rollout ranks
  MeshComms train_comms = create_mesh_comms(train_mesh);  // every rank takes part in both creations
  MeshComms gen_comms = create_mesh_comms(gen_mesh);
  EXPECT_EQ(train_comms.is_member(), train.contains(me));
  EXPECT_EQ(gen_comms.is_member(), gen.contains(me));
  if (gen_comms.is_member()) {
    EXPECT_EQ(gen_comms.dp->world_ranks(), gen_mesh.groups(GroupKind::kDp)[0]);
    EXPECT_EQ(gen_comms.tp, gen_comms.get(GroupKind::kTp));
    EXPECT_EQ(gen_comms.dp->name(), "policy.rollout/dp[0]");
  }
  for (GroupKind kind : kAllGroupKinds) {
    EXPECT_EQ(train_comms.get(kind) != nullptr, train.contains(me)) << group_name(kind);
    EXPECT_EQ(gen_comms.get(kind) != nullptr, gen.contains(me)) << group_name(kind);
  }

  Bridge bridge = Bridge::between(placement, "policy", "policy.rollout");
  const bool member = me == train.first || gen.contains(me);
  ASSERT_EQ(bridge.is_member(), member);
  EXPECT_EQ(bridge.is_source(), me == train.first);
  if (member) {
    EXPECT_EQ(bridge.size(), 1 + gen.size());
    EXPECT_EQ(bridge.comm()->name(), "policy->policy.rollout");
    // "Weights": the source's tensor reaches every rollout rank.
    at::Tensor weights = bridge.is_source() ? at::arange(1000, at::kBFloat16) : at::zeros({1000}, at::kBFloat16);
    bridge.broadcast(weights);
    EXPECT_TRUE(same(weights, at::arange(1000, at::kBFloat16)));
    at::Tensor more = bridge.is_source() ? at::full({10}, 3.f) : at::zeros({10});
    bridge.broadcast_async(more)->wait();
    EXPECT_TRUE(same(more, at::full({10}, 3.f)));
  }
}

}  // namespace
}  // namespace hpcrl::dist
