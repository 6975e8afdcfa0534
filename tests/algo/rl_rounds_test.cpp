// The round plans of a disaggregated RL stage: the order each side acts in for
// staleness 0, 1 and 2, and the bound every plan keeps (no sample is trained on
// more than k updates after the weights that generated it).
#include <gtest/gtest.h>

#include "hpcrl/algo/stages/rl_rounds.h"

using namespace hpcrl::algo;

TEST(RlRounds, SynchronousAlternatesGenerationAndTraining) {
  RoundPlan p = plan_rounds(0, 3, 0);
  EXPECT_EQ(describe(p.generation), "S0 G0 >0 S1 G1 >1 S2 G2 >2");
  EXPECT_EQ(describe(p.training), "S0 <0 U0 S1 <1 U1 S2 <2 U2");
  EXPECT_EQ(p.version, (std::vector<int64_t>{0, 1, 2}));  // every iteration samples the latest weights
}

TEST(RlRounds, OneStepOffPolicyGeneratesTheNextIterationDuringTheUpdate) {
  RoundPlan p = plan_rounds(0, 4, 1);
  EXPECT_EQ(describe(p.generation), "S0 G0 >0 G1 >1 S2 G2 >2 S3 G3 >3");
  // U0 runs while G1 is generated; the sync before G2 waits for G1's samples, so U1 overlaps G2.
  EXPECT_EQ(describe(p.training), "S0 <0 U0 <1 S2 U1 <2 S3 U2 <3 U3");
  // G0 and G1 use the first weights; G2 those after U0; G3 after U1: staleness 0, 1, 1, 1.
  EXPECT_EQ(p.version, (std::vector<int64_t>{0, 0, 1, 2}));
}

TEST(RlRounds, ResumedPlanStartsWithTheCheckpointsWeights) {
  RoundPlan p = plan_rounds(5, 7, 0);
  EXPECT_EQ(describe(p.generation), "S5 G5 >5 S6 G6 >6");
  EXPECT_EQ(describe(p.training), "S5 <5 U5 S6 <6 U6");
}

TEST(RlRounds, EveryPlanKeepsTheStalenessBoundAndMeetsAtTheSameSyncs) {
  for (int64_t k = 0; k <= 3; ++k)
    for (int64_t n = 1; n <= 6; ++n) {
      RoundPlan p = plan_rounds(0, n, k);
      std::vector<int64_t> gen_syncs, train_syncs;
      for (const auto& a : p.generation)
        if (a.step == RoundStep::kSyncWeights) gen_syncs.push_back(a.iteration);
      for (const auto& a : p.training)
        if (a.step == RoundStep::kSyncWeights) train_syncs.push_back(a.iteration);
      EXPECT_EQ(gen_syncs, train_syncs) << "k " << k << ", n " << n;  // the collectives pair up in order
      for (int64_t i = 0; i < n; ++i) {
        // U(i) runs at version i; its samples came from version[i].
        EXPECT_LE(i - p.version[size_t(i)], k) << "iteration " << i << ", k " << k;
        EXPECT_GE(i - p.version[size_t(i)], 0);
      }
      EXPECT_EQ(p.training.size(), gen_syncs.size() + 2 * size_t(n));  // each iteration received and updated once
    }
}

// A run stopped at the sync before generating 2 (k = 1) re-enters there: the trainer has done U0 and received 1,
// so its list goes on with U1; the generator's with G2.
TEST(RlRounds, AResumedPlanReEntersAtTheSyncItWasStoppedAt) {
  const auto p = resume_plan(plan_rounds(0, 4, 1), 2);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(describe(p->generation), "S2 G2 >2 S3 G3 >3");
  EXPECT_EQ(describe(p->training), "S2 U1 <2 S3 U2 <3 U3");
  EXPECT_EQ(p->sync_versions(), (std::vector<int64_t>{1, 2}));  // S2 after U0, S3 after U1
}

TEST(RlRounds, APlanHasNoSyncBeforeAnIterationItGeneratesWithTheSameWeights) {
  EXPECT_FALSE(resume_plan(plan_rounds(0, 4, 1), 1).has_value());  // G1 follows G0 without a sync
  EXPECT_FALSE(resume_plan(plan_rounds(0, 4, 1), 4).has_value());  // past the end
}

TEST(RlRounds, SyncVersionsAreTheUpdatesDoneAtEachSync) {
  // k = 2: "S0 <0 U0 <1 U1 <2 S3 U2 <3 S4 U3 <4 S5 U4 <5 U5": S0 before anything, then S3 after U1, S4 after U2,
  // S5 after U3.
  const RoundPlan p = plan_rounds(0, 6, 2);
  EXPECT_EQ(describe(p.training), "S0 <0 U0 <1 U1 <2 S3 U2 <3 S4 U3 <4 S5 U4 <5 U5");
  EXPECT_EQ(p.sync_versions(), (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(plan_rounds(3, 3, 0).sync_versions(), (std::vector<int64_t>{3}));  // an empty plan's one sync
}
