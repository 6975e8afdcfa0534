// The `model` reward across ranks (mpirun -np 2 and 4): a reward role split
// with tp = 2, sp = 2 or tp·sp = 4 gives every rank the scores a single-rank
// copy of the same weights computes for that rank's samples (fp32 tolerance),
// and with dp > 1 each rank scores its own samples (those of its policy
// replica). Layouts the reward model cannot run in are InputErrors, the same
// message on every rank: a pipelined reward role, one missing on some ranks, a
// dp size or a dp coordinate other than the policy's.
#include <gtest/gtest.h>

#include "reward_model_setup.h"

namespace hpcrl::testing {
namespace {

int world_size() { return dist::init(nullptr, nullptr).size; }
std::string n(int64_t v) { return std::to_string(v); }

// The reward role split tp × sp, the policy tp·sp (so both have the same dp);
// each rank's samples come from its policy replica.
void check_layout(int tp, int sp) {
  const int W = world_size();
  if (W % (tp * sp) != 0) GTEST_SKIP() << "needs a multiple of " << tp * sp << " ranks";
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}, parallel: {tp: " + n(tp * sp) + "}}",
                                             "{init: {preset: tiny-2l}, head: value, parallel: {tp: " + n(tp) +
                                                 ", sp: " + n(sp) + "}}"));
  ASSERT_EQ(p->rm().ctx.tp_size(), tp);
  ASSERT_EQ(p->rm().ctx.sp_size(), sp);
  ASSERT_EQ(p->rm().mesh.dp(), W / (tp * sp));
  const int replica = p->policy().ctx.dp_rank();
  Samples s = random_samples(5, 100 + replica);
  auto reference = single_rank_copy(p->rm());
  for (int64_t micro : {0, 2}) {
    SCOPED_TRACE("micro_batch " + n(micro));
    auto f = p->rewards({"rm"}, micro);
    std::vector<reward::RewardSample> text(5, reward::RewardSample{"", "", ""});
    auto got = f.score_batch(text, s.ids());
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = value_alone(*reference, s.prompts[i], s.responses[i]);
      EXPECT_NEAR(got[i].score, want, 1e-5 * std::max(1.0, std::abs(want))) << "sample " << i;
    }
    // Ranks of one replica agree exactly; other replicas scored other samples.
    at::Tensor mine = at::tensor({double(replica), got[0].score}, at::kDouble);
    at::Tensor all = p->env.world->all_gather(mine, 0);
    for (int r = 0; r < W; ++r) {
      if (all[2 * r].item<double>() == replica)
        EXPECT_EQ(all[2 * r + 1].item<double>(), got[0].score) << "rank " << r;
      else
        EXPECT_NE(all[2 * r + 1].item<double>(), got[0].score) << "rank " << r;
    }
  }
}

TEST(RewardModelMpi, DataParallelRanksScoreTheirOwnSamples) { check_layout(1, 1); }
TEST(RewardModelMpi, TensorParallelMatchesOneRank) { check_layout(2, 1); }
TEST(RewardModelMpi, SequenceParallelMatchesOneRank) { check_layout(1, 2); }
TEST(RewardModelMpi, TensorAndSequenceParallelMatchesOneRank) { check_layout(2, 2); }

TEST(RewardModelMpi, APipelinedRewardModelIsRefused) {
  // The runner refuses it before building any model, on every rank.
  std::string err = input_error([&] {
    make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}}",
                                      "{init: {preset: tiny-2l}, head: value, parallel: {pp: 2}}"));
  });
  EXPECT_EQ(err.rfind("rm.yaml:4:", 0), 0u) << err;
  EXPECT_NE(err.find("models.rm.parallel.pp = 2, but stage stages[0].grpo scores responses with role 'rm' (the "
                     "model of reward 'rm'), and reward models run unpipelined so far; use pp: 1"),
            std::string::npos) << err;
}

TEST(RewardModelMpi, ADataParallelSizeOtherThanThePolicysIsRefused) {
  const int W = world_size();
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}, parallel: {tp: 2}}",
                                             "{init: {preset: tiny-2l}, head: value}"));
  std::string err = input_error([&] { p->rewards({"rm"}); });
  EXPECT_EQ(err.rfind(kRewardPos, 0), 0u) << err;
  EXPECT_NE(err.find("the reward model 'rm' has dp = " + n(W) + " but the policy 'policy' has dp = " + n(W / 2)),
            std::string::npos) << err;
  EXPECT_NE(err.find("give models.rm tp·sp = 2 (the policy's tp·sp·pp), e.g. parallel: {tp: 2}"), std::string::npos)
      << err;
}

TEST(RewardModelMpi, APolicyMissingOnSomeRanksIsRefusedAtValidation) {
  // The reward model beside a policy on half the ranks: the stage would generate on the policy's ranks only.
  const int W = world_size();
  const std::string half = n(W / 2 - 1), rest = n(W / 2), last = n(W - 1);
  const std::string yaml = rm_pipeline_yaml(
      "{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}",
      "placement: {mode: disaggregated, ranges: {policy: [0, " + half + "], rm: [" + rest + ", " + last + "]}}\n");
  auto loaded = config::check_pipeline_text(yaml, "rm.yaml", {}, {W, false});
  ASSERT_FALSE(loaded.ok());
  std::string all;
  for (const auto& e : loaded.diagnostics.errors) all += e.str() + "\n";
  EXPECT_NE(all.find("generates on the policy's ranks, so the policy needs every rank"), std::string::npos) << all;
}

TEST(RewardModelMpi, ADataParallelCoordinateOtherThanThePolicysIsRefused) {
  // Policy pp = 2 × dp = 2: rank 1 is replica 1 (pp stage 0); the tp = 2 reward model puts rank 1 in replica 0.
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}, parallel: {pp: 2}}",
                                             "{init: {preset: tiny-2l}, head: value, parallel: {tp: 2}}"));
  ASSERT_EQ(p->rm().mesh.dp(), p->policy().mesh.dp());
  std::string err = input_error([&] { p->rewards({"rm"}); });
  EXPECT_EQ(err.rfind(kRewardPos, 0), 0u) << err;
  EXPECT_NE(err.find("rank 1 holds data-parallel replica 1 of the policy 'policy' but replica 0 of the reward "
                     "model 'rm', so it would score samples it did not generate"),
            std::string::npos) << err;
}

}  // namespace
}  // namespace hpcrl::testing
