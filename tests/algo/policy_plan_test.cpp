// A GRPO/PPO stage's plan (policy_plan.h): where generation runs relative to
// training, decided from the roles alone, and what this rank does. Roles are
// built by hand: a rank is a member when it holds a model; meshes say where a
// role's ranks start.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <memory>

#include "hpcrl/algo/stages/policy_plan.h"
#include "hpcrl/config/model_arch.h"

namespace {

using namespace hpcrl;
using algo::GenerationPlacement;
using algo::StageSide;
using algo::OldLogprobs;

const config::GrpoStage kGrpo;  // prompts 0, the defaults: the placement tests read no config

// A role over world ranks [first, first + n); this rank holds its model when `member`.
algo::Role role_at(int first, int n, bool member) {
  algo::Role role;
  role.mesh = dist::Mesh(dist::ParallelSizes{}, first, n);  // dp = 0: all n ranks data-parallel
  if (member)
    role.model = std::make_shared<model::DecoderModel>(model_arch_preset("tiny-2l"), parallel::ParallelContext{},
                                                       model::ModelOptions{});
  return role;
}

TEST(PolicyPlan, ThePolicyGeneratingItselfIsColocated) {
  algo::Role policy = role_at(0, 2, true);
  const algo::PolicyPlan plan = algo::plan_policy_stage(kGrpo, policy, policy, nullptr, false, false);
  EXPECT_EQ(plan.placement, GenerationPlacement::kColocated);
  EXPECT_TRUE(plan.generates);
  EXPECT_TRUE(plan.trains);
  EXPECT_FALSE(plan.pipeline_copy);
}

TEST(PolicyPlan, ACopyOnTheSameRanksIsResharded) {
  algo::Role policy = role_at(0, 2, true), copy = role_at(0, 2, true);  // same first rank, another object
  EXPECT_EQ(algo::plan_policy_stage(kGrpo, policy, copy, nullptr, false, false).placement, GenerationPlacement::kResharded);
}

TEST(PolicyPlan, AGeneratorOnRanksOfItsOwnIsDisaggregatedAndItsRanksGenerate) {
  // World ranks 0-1 train, 2-3 generate; this rank is a generating one.
  algo::Role policy = role_at(0, 2, false), generator = role_at(2, 2, true);
  const algo::PolicyPlan plan = algo::plan_policy_stage(kGrpo, policy, generator, nullptr, false, false);
  EXPECT_EQ(plan.placement, GenerationPlacement::kDisaggregated);
  EXPECT_EQ(plan.side, StageSide::kGenerator);
  EXPECT_FALSE(plan.trains);
}

TEST(PolicyPlan, ATrainingRankOfADisaggregatedStageTrains) {
  algo::Role policy = role_at(0, 2, true), generator = role_at(2, 2, false);
  EXPECT_EQ(algo::plan_policy_stage(kGrpo, policy, generator, nullptr, false, false).side, StageSide::kTrainer);
}

TEST(PolicyPlan, AReferenceOnRanksOfItsOwnServesAndHelps) {
  // Ranks 0-1 train, 2-3 generate, 4 holds the reference: this rank is rank 4.
  algo::Role policy = role_at(0, 2, false), generator = role_at(2, 2, false), reference = role_at(4, 1, true);
  const algo::PolicyPlan plan = algo::plan_policy_stage(kGrpo, policy, generator, &reference, true, false);
  EXPECT_TRUE(plan.serves_reference);
  EXPECT_EQ(plan.side, StageSide::kHelper);
}

TEST(PolicyPlan, AReferenceSharingThePolicysRanksServesNothing) {
  algo::Role policy = role_at(0, 2, true), reference = role_at(0, 2, true);
  EXPECT_FALSE(algo::plan_policy_stage(kGrpo, policy, policy, &reference, false, false).serves_reference);
}

TEST(PolicyPlan, ARewardModelOnRanksOfItsOwnScores) {
  algo::Role policy = role_at(0, 2, false), generator = role_at(2, 2, false);
  EXPECT_EQ(algo::plan_policy_stage(kGrpo, policy, generator, nullptr, false, true).side, StageSide::kScorer);
}

// A GRPO stage of 4 prompts × 8 samples (32 responses), its old log-probs recomputed.
config::GrpoStage recomputed() {
  config::GrpoStage s;
  s.prompts = 4;
  s.recompute_old_logprobs = true;
  return s;
}

TEST(OldLogprobSource, WithoutRecomputingTheyAreTheEngines) {
  EXPECT_EQ(algo::old_logprob_source(config::GrpoStage{}), OldLogprobs::kEngine);
}

TEST(OldLogprobSource, OneOptimizerStepABatchTakesThemFromTheUpdatesForward) {
  config::GrpoStage s = recomputed();
  s.mini_batch = 32;  // 32 / 32 = one mini-batch, epochs 1
  EXPECT_EQ(algo::old_logprob_source(s), OldLogprobs::kUpdateForward);
}

TEST(OldLogprobSource, TwoMiniBatchesKeepThePass) {
  config::GrpoStage s = recomputed();
  s.mini_batch = 16;  // 32 / 16 = two optimizer steps: the second runs on a policy that moved
  EXPECT_EQ(algo::old_logprob_source(s), OldLogprobs::kPass);
}

TEST(OldLogprobSource, TwoEpochsKeepThePass) {
  config::GrpoStage s = recomputed();
  s.epochs = 2;
  EXPECT_EQ(algo::old_logprob_source(s), OldLogprobs::kPass);
}

TEST(OldLogprobSource, AKlInTheRewardReadsThemBeforeTheUpdateAndKeepsThePass) {
  config::GrpoStage s = recomputed();
  s.reference = "ref";
  s.kl.in_reward = true;
  s.kl.coef = 0.01;
  EXPECT_EQ(algo::old_logprob_source(s), OldLogprobs::kPass);
  s.kl.in_reward = false;  // the KL as a loss term is computed inside the update
  EXPECT_EQ(algo::old_logprob_source(s), OldLogprobs::kUpdateForward);
}

}  // namespace
