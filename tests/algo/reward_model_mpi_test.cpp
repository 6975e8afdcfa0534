// The `model` reward across ranks (mpirun -np 2 and 4): a reward role split
// with tp = 2, sp = 2 or tp·sp = 4 gives every rank the scores a single-rank
// copy of the same weights computes for that rank's samples (fp32 tolerance), as
// does a pipelined one (pp = 2),
// and with dp > 1 each rank scores its own samples (those of its policy
// replica). Layouts the reward model cannot run in are InputErrors, the same
// message on every rank: one missing on some ranks, a dp size or a dp
// coordinate other than the policy's. With generation on ranks
// of its own, a reward model on those ranks scores there, and one on ranks of
// its own answers every scoring round of every generating replica with the
// scores a single-rank copy computes.
#include <gtest/gtest.h>

#include "reward_model_setup.h"

namespace hpcrl::testing {
namespace {

int world_size() { return dist::init(nullptr, nullptr).size; }
std::string n(int64_t v) { return std::to_string(v); }

// Each rank's scores of its policy replica's samples against a single-rank copy of the reward role,
// at micro-batches of all rows and of 2.
void check_scores(RmPipeline& p) {
  const int W = world_size();
  const int replica = p.policy().ctx.dp_rank();
  Samples s = random_samples(5, 100 + replica);
  auto reference = single_rank_copy(p.rm());
  for (int64_t micro : {0, 2}) {
    SCOPED_TRACE("micro_batch " + n(micro));
    auto f = p.rewards({"rm"}, micro);
    std::vector<reward::RewardSample> text(5, reward::RewardSample{"", "", ""});
    auto got = f.score_batch(text, s.ids());
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = value_alone(*reference, s.prompts[i], s.responses[i]);
      EXPECT_NEAR(got[i].score, want, 1e-5 * std::max(1.0, std::abs(want))) << "sample " << i;
    }
    // Ranks of one replica agree exactly; other replicas scored other samples.
    at::Tensor mine = at::tensor({double(replica), got[0].score}, at::kDouble);
    at::Tensor all = p.env.world->all_gather(mine, 0);
    for (int r = 0; r < W; ++r) {
      if (all[2 * r].item<double>() == replica)
        EXPECT_EQ(all[2 * r + 1].item<double>(), got[0].score) << "rank " << r;
      else
        EXPECT_NE(all[2 * r + 1].item<double>(), got[0].score) << "rank " << r;
    }
  }
}

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
  check_scores(*p);
}

TEST(RewardModelMpi, DataParallelRanksScoreTheirOwnSamples) { check_layout(1, 1); }
TEST(RewardModelMpi, TensorParallelMatchesOneRank) { check_layout(2, 1); }
TEST(RewardModelMpi, SequenceParallelMatchesOneRank) { check_layout(1, 2); }
TEST(RewardModelMpi, TensorAndSequenceParallelMatchesOneRank) { check_layout(2, 2); }

TEST(RewardModelMpi, APipelinedRewardModelMatchesOneRank) {
  // Policy and reward model both pp = 2, so they share dp (W/2) and each rank's replica coordinate.
  const int W = world_size();
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}, parallel: {pp: 2}}",
                                             "{init: {preset: tiny-2l}, head: value, parallel: {pp: 2}}"));
  ASSERT_EQ(p->rm().mesh.pp(), 2);
  ASSERT_EQ(p->rm().mesh.dp(), W / 2);
  check_scores(*p);
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

TEST(RewardModelMpi, BesideGenerationOnRanksOfItsOwnEachGeneratingRankScoresItsSamples) {
  // Trainer on rank 0; generation and the reward model share ranks 1..W-1 (dp = W - 1).
  const int W = world_size();
  auto p = make_rm_pipeline(rm_pipeline_yaml(
      "{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}",
      "placement: {mode: disaggregated, ranges: {policy: [0, 0], policy.rollout: [1, " + n(W - 1) + "], rm: [1, " +
          n(W - 1) + "]}}\n"));
  algo::RewardFunction f(p->env, {"rm"}, p->generator(), 0, "grpo");
  EXPECT_FALSE(f.serves_apart());
  if (!p->generator().member()) return;
  auto reference = single_rank_copy(p->rm());
  Samples s = random_samples(4, 200 + p->generator().ctx.dp_rank());
  std::vector<reward::RewardSample> text(4, reward::RewardSample{"", "", ""});
  auto got = f.score_batch(text, s.ids());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i].score, value_alone(*reference, s.prompts[i], s.responses[i]), 1e-5) << "sample " << i;
}

// Generation on `gen`, the reward model (`rm_role`) on `rm` of its own, trainer on rank 0 (np 4):
// two iterations of two scoring rounds of 5 samples per generating replica.
void check_reward_model_apart(const std::string& gen, const std::string& rm, const std::string& rm_role) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}}", rm_role,
                                             "placement: {mode: disaggregated, ranges: {policy: [0, 0], "
                                             "policy.rollout: " + gen + ", rm: " + rm + "}}\n"));
  algo::Role& generator = p->generator();
  algo::RewardFunction f(p->env, {"rm"}, generator, 2, "grpo");
  EXPECT_EQ(f.serves_apart(), p->rm().member());
  const int replicas = generator.mesh.dp(), iterations = 2, rounds = 2, per_round = 5;
  auto samples = [&](int j, int it, int r) { return random_samples(per_round, 300 + 100 * j + 10 * it + r); };
  // The reward ranks' single-rank scores of every replica's samples, [replica][iteration][round][sample].
  at::Tensor expected = at::zeros({replicas * iterations * rounds * per_round}, at::kDouble);
  if (p->rm().member()) {
    auto reference = single_rank_copy(p->rm());
    auto e = expected.accessor<double, 1>();
    int64_t k = 0;
    for (int j = 0; j < replicas; ++j)
      for (int it = 0; it < iterations; ++it)
        for (int r = 0; r < rounds; ++r) {
          Samples s = samples(j, it, r);
          for (int i = 0; i < per_round; ++i) e[k++] = value_alone(*reference, s.prompts[size_t(i)], s.responses[size_t(i)]);
        }
  }
  at::Tensor all = p->env.world->all_gather(expected, 0).view({4, -1})[p->rm().mesh.first_rank()];
  for (int it = 0; it < iterations; ++it) {
    if (p->rm().member()) f.serve_iteration();
    if (!generator.member()) continue;
    const int j = generator.ctx.dp_rank();
    for (int r = 0; r < rounds; ++r) {
      Samples s = samples(j, it, r);
      std::vector<reward::RewardSample> text(size_t(per_round), reward::RewardSample{"", "", ""});
      auto got = f.score_batch(text, s.ids());
      ASSERT_EQ(got.size(), size_t(per_round));
      for (int i = 0; i < per_round; ++i) {
        const double want = all[((j * iterations + it) * rounds + r) * per_round + i].item<double>();
        EXPECT_NEAR(got[size_t(i)].score, want, 1e-5) << "replica " << j << " iteration " << it << " round " << r
                                                      << " sample " << i;
      }
    }
    f.end_iteration();
  }
}

TEST(RewardModelMpi, OnARankOfItsOwnItAnswersEveryRoundOfTwoGeneratingReplicas) {
  check_reward_model_apart("[1, 2]", "[3, 3]", "{init: {preset: tiny-2l}, head: value}");
}

TEST(RewardModelMpi, OnTwoRanksOfItsOwnAtTp2ItAnswersTheGeneratorsRounds) {
  check_reward_model_apart("[1, 1]", "[2, 3]", "{init: {preset: tiny-2l}, head: value, parallel: {tp: 2}}");
}

TEST(RewardModelMpi, PipelinedOnTwoRanksOfItsOwnItAnswersTheGeneratorsRounds) {
  check_reward_model_apart("[1, 1]", "[2, 3]", "{init: {preset: tiny-2l}, head: value, parallel: {pp: 2}}");
}

TEST(RewardModelMpi, SharingSomeOfTheGenerationsRanksIsRefusedAtValidation) {
  const int W = world_size();
  if (W != 4) GTEST_SKIP() << "needs 4 ranks";
  const std::string yaml = rm_pipeline_yaml(
      "{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}",
      "placement: {mode: disaggregated, ranges: {policy: [0, 0], policy.rollout: [1, 2], rm: [2, 3]}}\n");
  auto loaded = config::check_pipeline_text(yaml, "rm.yaml", {}, {W, false});
  ASSERT_FALSE(loaded.ok());
  std::string all;
  for (const auto& e : loaded.diagnostics.errors) all += e.str() + "\n";
  EXPECT_NE(all.find("reward 'rm' scores responses where they are generated, round by round, so its model 'rm' needs "
                     "the generation's ranks exactly or ranks of its own; it shares ranks with 'policy.rollout'"),
            std::string::npos) << all;
  EXPECT_NE(all.find("give rm the range [1, 2] (beside generation) or ranks no other role uses"), std::string::npos)
      << all;
}

}  // namespace
}  // namespace hpcrl::testing
