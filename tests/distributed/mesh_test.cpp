// Golden tests of the process mesh, no MPI: hand-worked 8- and 16-rank tables
// written out literally, then ≥30 layouts from 1 to 4096 ranks (with ep and
// rank offsets) checked rank by rank against the closed-form formulas of
// docs/communication.md (Meshes), and the layout errors users see.
#include <gtest/gtest.h>

#include <tuple>

#include "hpcrl/distributed/mesh.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

using Table = std::vector<std::array<int, 6>>;  // per rank: tp sp dp pp ep edp

void expect_table(const Mesh& m, const Table& table) {
  ASSERT_EQ(static_cast<int>(table.size()), m.size());
  for (int i = 0; i < m.size(); ++i) {
    int r = m.first_rank() + i;
    MeshCoord c = m.coord(r);
    std::array<int, 6> got{c.tp, c.sp, c.dp, c.pp, c.ep, c.edp};
    EXPECT_EQ(got, table[i]) << "rank " << r;
  }
}

RankGroups shifted(RankGroups g, int by) {
  for (auto& v : g)
    for (int& r : v) r += by;
  return g;
}

// tp=2 sp=1 ep=2 dp=2 pp=2 on 8 ranks (edp=1).
TEST(MeshGolden, EightRanksTp2Dp2Pp2Ep2) {
  Mesh m({/*tp=*/2, /*sp=*/1, /*ep=*/2, /*dp=*/0, /*pp=*/2}, 0, 8, "policy");
  EXPECT_EQ(m.dp(), 2);
  EXPECT_EQ(m.edp(), 1);
  EXPECT_EQ(m.groups(GroupKind::kTp), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kSp), (RankGroups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(m.groups(GroupKind::kDp), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kPp), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kDpSp), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kTpPp), (RankGroups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kEp), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kEdp), (RankGroups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  expect_table(m, {{0, 0, 0, 0, 0, 0},
                   {1, 0, 0, 0, 0, 0},
                   {0, 0, 1, 0, 1, 0},
                   {1, 0, 1, 0, 1, 0},
                   {0, 0, 0, 1, 0, 0},
                   {1, 0, 0, 1, 0, 0},
                   {0, 0, 1, 1, 1, 0},
                   {1, 0, 1, 1, 1, 0}});
  EXPECT_EQ(m.rank_name(5), "TP(2)-SP(1)-EP(2)-DP(2)-PP(2)-Rank(5)");
  EXPECT_EQ(m.pp_prev(5), 1);
  EXPECT_EQ(m.pp_next(5), -1);
  EXPECT_EQ(m.pp_next(1), 5);
  EXPECT_EQ(m.pp_prev(1), -1);
  EXPECT_TRUE(m.is_first_stage(3));
  EXPECT_TRUE(m.is_last_stage(6));
  EXPECT_FALSE(m.is_last_stage(2));
  EXPECT_EQ(m.group_of(GroupKind::kTpPp, 6), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(m.group_index(GroupKind::kDp, 5), 3);
}

// tp=1 sp=2 ep=2 dp=2 pp=2 on 8 ranks (edp=2): ep and edp both non-trivial.
TEST(MeshGolden, EightRanksSp2Dp2Pp2Ep2) {
  Mesh m({1, 2, 2, 2, 2}, 0, 8, "policy");
  EXPECT_EQ(m.groups(GroupKind::kTp), (RankGroups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(m.groups(GroupKind::kSp), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kDp), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kPp), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kDpSp), (RankGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kTpPp), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kEp), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::kEdp), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  expect_table(m, {{0, 0, 0, 0, 0, 0},
                   {0, 1, 0, 0, 1, 0},
                   {0, 0, 1, 0, 0, 1},
                   {0, 1, 1, 0, 1, 1},
                   {0, 0, 0, 1, 0, 0},
                   {0, 1, 0, 1, 1, 0},
                   {0, 0, 1, 1, 0, 1},
                   {0, 1, 1, 1, 1, 1}});
}

// tp=2 sp=1 ep=2 dp=4 pp=2 on 16 ranks (edp=2): the expert grid regroups dp.
const RankGroups k16Tp{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}};
const RankGroups k16Dp{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}};
const RankGroups k16Pp{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}};
const RankGroups k16TpPp{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}};
const RankGroups k16Ep{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}};
const RankGroups k16Edp{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}};
const Table k16Table{{0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0}, {0, 0, 1, 0, 1, 0}, {1, 0, 1, 0, 1, 0},
                     {0, 0, 2, 0, 0, 1}, {1, 0, 2, 0, 0, 1}, {0, 0, 3, 0, 1, 1}, {1, 0, 3, 0, 1, 1},
                     {0, 0, 0, 1, 0, 0}, {1, 0, 0, 1, 0, 0}, {0, 0, 1, 1, 1, 0}, {1, 0, 1, 1, 1, 0},
                     {0, 0, 2, 1, 0, 1}, {1, 0, 2, 1, 0, 1}, {0, 0, 3, 1, 1, 1}, {1, 0, 3, 1, 1, 1}};

TEST(MeshGolden, SixteenRanksTp2Dp4Pp2Ep2) {
  Mesh m({2, 1, 2, 4, 2}, 0, 16, "policy");
  EXPECT_EQ(m.edp(), 2);
  EXPECT_EQ(m.groups(GroupKind::kTp), k16Tp);
  EXPECT_EQ(m.groups(GroupKind::kDp), k16Dp);
  EXPECT_EQ(m.groups(GroupKind::kDpSp), k16Dp);
  EXPECT_EQ(m.groups(GroupKind::kPp), k16Pp);
  EXPECT_EQ(m.groups(GroupKind::kTpPp), k16TpPp);
  EXPECT_EQ(m.groups(GroupKind::kEp), k16Ep);
  EXPECT_EQ(m.groups(GroupKind::kEdp), k16Edp);
  expect_table(m, k16Table);
  EXPECT_EQ(m.rank_name(13), "TP(2)-SP(1)-EP(2)-DP(4)-PP(2)-Rank(13)");
  EXPECT_EQ(m.pp_prev(13), 5);
  EXPECT_EQ(m.pp_next(5), 13);
}

TEST(MeshGolden, SixteenRanksPlacedAtAnOffsetUseWorldRanks) {
  // The same role placed on world ranks 16-31 (disaggregated placement).
  Mesh m({2, 1, 2, 4, 2}, 16, 16, "policy.rollout");
  EXPECT_EQ(m.groups(GroupKind::kTp), shifted(k16Tp, 16));
  EXPECT_EQ(m.groups(GroupKind::kDp), shifted(k16Dp, 16));
  EXPECT_EQ(m.groups(GroupKind::kPp), shifted(k16Pp, 16));
  EXPECT_EQ(m.groups(GroupKind::kTpPp), shifted(k16TpPp, 16));
  EXPECT_EQ(m.groups(GroupKind::kEp), shifted(k16Ep, 16));
  EXPECT_EQ(m.groups(GroupKind::kEdp), shifted(k16Edp, 16));
  expect_table(m, k16Table);
  EXPECT_EQ(m.pp_next(21), 29);
  EXPECT_EQ(m.rank_name(29), "TP(2)-SP(1)-EP(2)-DP(4)-PP(2)-Rank(29)");
  EXPECT_FALSE(m.contains(15));
  EXPECT_THROW(m.coord(15), RuntimeError);
}

// ---- closed form, many layouts ------------------------------------------------

struct Layout {
  int tp, sp, ep, dp, pp, first;
};

// The docs/communication.md formulas, written independently of Mesh.
struct ClosedForm {
  Layout l;
  int rank(int tp, int sp, int dp, int pp) const { return l.first + tp + l.tp * (sp + l.sp * (dp + l.dp * pp)); }
  int expert_rank(int tp, int ep, int edp, int pp) const {
    return l.first + tp + l.tp * (ep + l.ep * edp) + l.tp * l.sp * l.dp * pp;
  }
};

void check_closed_form(const Layout& l) {
  SCOPED_TRACE(::testing::Message() << "tp=" << l.tp << " sp=" << l.sp << " ep=" << l.ep << " dp=" << l.dp
                                    << " pp=" << l.pp << " first=" << l.first);
  const int n = l.tp * l.sp * l.dp * l.pp;
  const int edp = l.sp * l.dp / l.ep;
  Mesh m({l.tp, l.sp, l.ep, 0, l.pp}, l.first, n, "role");  // dp derived
  ASSERT_EQ(m.dp(), l.dp);
  ASSERT_EQ(m.edp(), edp);
  ClosedForm f{l};
  for (int i = 0; i < n; ++i) {
    const int r = l.first + i;
    const int tp = i % l.tp, sp = (i / l.tp) % l.sp, dp = (i / (l.tp * l.sp)) % l.dp, pp = i / (l.tp * l.sp * l.dp);
    const int e = (i / l.tp) % (l.sp * l.dp), ep = e % l.ep, ed = e / l.ep;
    MeshCoord c = m.coord(r);
    ASSERT_EQ(std::make_tuple(c.tp, c.sp, c.dp, c.pp, c.ep, c.edp), std::make_tuple(tp, sp, dp, pp, ep, ed)) << "rank " << r;
    ASSERT_EQ(f.rank(tp, sp, dp, pp), r);
    ASSERT_EQ(f.expert_rank(tp, ep, ed, pp), r);
    std::vector<int> g;
    for (int t = 0; t < l.tp; ++t) g.push_back(f.rank(t, sp, dp, pp));
    ASSERT_EQ(m.group_of(GroupKind::kTp, r), g) << "tp group of rank " << r;
    g.clear();
    for (int s = 0; s < l.sp; ++s) g.push_back(f.rank(tp, s, dp, pp));
    ASSERT_EQ(m.group_of(GroupKind::kSp, r), g) << "sp group of rank " << r;
    g.clear();
    for (int d = 0; d < l.dp; ++d) g.push_back(f.rank(tp, sp, d, pp));
    ASSERT_EQ(m.group_of(GroupKind::kDp, r), g) << "dp group of rank " << r;
    g.clear();
    for (int p = 0; p < l.pp; ++p) g.push_back(f.rank(tp, sp, dp, p));
    ASSERT_EQ(m.group_of(GroupKind::kPp, r), g) << "pp group of rank " << r;
    g.clear();
    for (int d = 0; d < l.dp; ++d)
      for (int s = 0; s < l.sp; ++s) g.push_back(f.rank(tp, s, d, pp));
    ASSERT_EQ(m.group_of(GroupKind::kDpSp, r), g) << "dp_sp group of rank " << r;
    g.clear();
    for (int p = 0; p < l.pp; ++p)
      for (int t = 0; t < l.tp; ++t) g.push_back(f.rank(t, sp, dp, p));
    ASSERT_EQ(m.group_of(GroupKind::kTpPp, r), g) << "tp_pp group of rank " << r;
    g.clear();
    for (int x = 0; x < l.ep; ++x) g.push_back(f.expert_rank(tp, x, ed, pp));
    ASSERT_EQ(m.group_of(GroupKind::kEp, r), g) << "ep group of rank " << r;
    g.clear();
    for (int x = 0; x < edp; ++x) g.push_back(f.expert_rank(tp, ep, x, pp));
    ASSERT_EQ(m.group_of(GroupKind::kEdp, r), g) << "edp group of rank " << r;
    ASSERT_EQ(m.pp_prev(r), pp == 0 ? -1 : f.rank(tp, sp, dp, pp - 1));
    ASSERT_EQ(m.pp_next(r), pp == l.pp - 1 ? -1 : f.rank(tp, sp, dp, pp + 1));
  }
  // Every kind partitions the role's ranks into groups of the expected size.
  const std::pair<GroupKind, int> sizes[] = {{GroupKind::kTp, l.tp},          {GroupKind::kSp, l.sp},
                                             {GroupKind::kDp, l.dp},          {GroupKind::kPp, l.pp},
                                             {GroupKind::kDpSp, l.dp * l.sp}, {GroupKind::kTpPp, l.tp * l.pp},
                                             {GroupKind::kEp, l.ep},          {GroupKind::kEdp, edp}};
  for (auto [kind, size] : sizes) {
    ASSERT_EQ(static_cast<int>(m.groups(kind).size()), n / size) << group_name(kind);
    for (const auto& grp : m.groups(kind)) ASSERT_EQ(static_cast<int>(grp.size()), size) << group_name(kind);
  }
}

TEST(MeshClosedForm, ThirtySixLayoutsFromOneTo4096Ranks) {
  const std::vector<Layout> layouts = {
      // tp sp ep dp pp first
      {1, 1, 1, 1, 1, 0},    {1, 1, 1, 1, 1, 5},    {2, 1, 1, 1, 1, 0},    {1, 2, 1, 1, 1, 0},
      {1, 1, 1, 2, 1, 0},    {1, 1, 1, 1, 2, 0},    {1, 1, 2, 2, 1, 0},    {2, 2, 1, 1, 1, 0},
      {2, 1, 2, 2, 2, 0},    {1, 2, 2, 2, 2, 0},    {2, 2, 4, 2, 1, 0},    {4, 1, 1, 2, 1, 4},
      {2, 1, 2, 4, 2, 0},    {2, 1, 2, 4, 2, 16},   {2, 2, 2, 2, 2, 0},    {1, 4, 4, 1, 4, 0},
      {4, 1, 3, 3, 2, 0},    {3, 1, 1, 5, 1, 7},    {2, 3, 3, 2, 1, 0},    {1, 3, 9, 3, 2, 0},
      {8, 1, 8, 8, 1, 0},    {8, 2, 4, 4, 2, 0},    {4, 4, 2, 4, 2, 0},    {2, 1, 1, 1, 16, 0},
      {8, 1, 16, 16, 4, 0},  {8, 2, 8, 16, 2, 512}, {4, 1, 32, 64, 4, 0},  {8, 4, 32, 16, 2, 0},
      {8, 1, 64, 128, 4, 0}, {1, 1, 1, 4096, 1, 0}, {4096, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 4096, 0},
      {8, 2, 16, 64, 4, 0},  {16, 1, 8, 32, 8, 0},  {2, 8, 64, 32, 8, 0},  {4, 2, 4, 8, 8, 1024},
  };
  ASSERT_GE(layouts.size(), 30u);
  for (const auto& l : layouts) {
    check_closed_form(l);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MeshClosedForm, ExplicitDpMatchesDerivedDp) {
  Mesh derived({2, 2, 2, 0, 2}, 0, 16);
  Mesh explicit_dp({2, 2, 2, 2, 2}, 0, 16);
  for (GroupKind k : kAllGroupKinds) EXPECT_EQ(derived.groups(k), explicit_dp.groups(k)) << group_name(k);
  EXPECT_EQ(derived.describe(), "tp=2 sp=2 ep=2 dp=2 pp=2 on ranks 0-15");
}

// ---- errors --------------------------------------------------------------------

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(MeshErrors, ProductNotEqualToRanks) {
  std::string e = error_of([] { Mesh({2, 1, 1, 3, 2}, 0, 8, "policy"); });
  EXPECT_EQ(e, "role 'policy': tp=2 × sp=1 × dp=3 × pp=2 = 12, but the role has 8 ranks (ranks 0-7); the product "
               "must equal the rank count (omit dp to derive it)");
}

TEST(MeshErrors, ModelDimsNotDividingRanks) {
  std::string e = error_of([] { Mesh({3, 1, 1, 0, 1}, 8, 8, "critic"); });
  EXPECT_EQ(e, "role 'critic' has 8 ranks (ranks 8-15), which tp=3 × sp=1 × pp=1 = 3 does not divide; dp = ranks / "
               "(tp·sp·pp) must be whole: choose tp·sp·pp among 1, 2, 4, 8");
}

TEST(MeshErrors, EpNotDividingSpDp) {
  std::string e = error_of([] { Mesh({2, 1, 3, 0, 1}, 0, 8, "policy"); });
  EXPECT_EQ(e, "role 'policy': ep=3 does not divide sp × dp = 1 × 4 = 4; experts are sharded over the sp·dp ranks "
               "of each tp slot, so choose ep among 1, 2, 4");
}

TEST(MeshErrors, SizeBelowOne) {
  std::string e = error_of([] { Mesh({0, 1, 1, 0, 1}, 0, 8, "policy"); });
  EXPECT_NE(e.find("parallel sizes must be at least 1 (got tp=0"), std::string::npos) << e;
}

TEST(MeshErrors, ModelChecksListEveryViolatedFactor) {
  Mesh m({4, 2, 4, 0, 4}, 0, 64, "policy");  // dp = 2, sp·dp = 4
  ModelDims d;
  d.heads = 12;      // 12 % (4·2) != 0
  d.kv_heads = 6;    // 6 % 4 != 0 and 4 % 6 != 0
  d.layers = 3;      // < pp = 4
  d.experts = 6;     // 6 % 4 != 0
  d.seq_len = 1001;  // odd, sp = 2
  std::string e = error_of([&] { m.check_model(d); });
  EXPECT_EQ(e,
            "role 'policy': layout tp=4 sp=2 ep=4 dp=2 pp=4 on ranks 0-63 does not fit the model:\n"
            "  - heads=12 is not divisible by tp × sp = 4 × 2 = 8 (tp splits the heads, Ulysses sp splits them again)\n"
            "  - kv_heads=6 and tp=4: need kv_heads % tp == 0 (KV heads split) or tp % kv_heads == 0 (KV heads "
            "replicated)\n"
            "  - layers=3 is less than pp=4 (every pp stage needs at least one layer)\n"
            "  - experts=6 is not divisible by ep=4\n"
            "  - seq_len=1001 is not divisible by sp=2 (Ulysses splits the sequence)");
}

TEST(MeshErrors, ModelChecksAcceptGqaReplicationAndUnknownDims) {
  Mesh m({8, 1, 1, 0, 2}, 0, 16, "policy");
  ModelDims d;
  d.heads = 32;
  d.kv_heads = 4;  // tp % kv == 0: KV heads replicated
  d.layers = 2;
  m.check_model(d);
  m.check_model(ModelDims{});  // nothing known, nothing checked
  Mesh moe({1, 1, 2, 0, 1}, 0, 2, "policy");
  ModelDims dense;
  dense.heads = 4;
  dense.layers = 2;
  EXPECT_EQ(error_of([&] { moe.check_model(dense); }),
            "role 'policy': layout tp=1 sp=1 ep=2 dp=2 pp=1 on ranks 0-1 does not fit the model:\n"
            "  - ep=2 but the model is dense (no experts); use ep=1");
}

}  // namespace
}  // namespace hpcrl::dist
