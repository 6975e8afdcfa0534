// A stage's kind is the alternative its body holds (pipeline_config.h): the
// kind, the GRPO/PPO view and the per-kind facts follow the body.
#include <gtest/gtest.h>

#include "hpcrl/config/pipeline_config.h"

using namespace hpcrl::config;

namespace {

StageConfig stage_of(StageBody body) {
  StageConfig st;
  st.path = "stages[0]";
  st.body = std::move(body);
  return st;
}

TEST(StageConfig, KindIsTheAlternativeTheBodyHolds) {
  for (StageKind k : {StageKind::sft, StageKind::grpo, StageKind::ppo, StageKind::distill})
    EXPECT_EQ(stage_of(default_body(k)).kind(), k) << to_string(k);
}

TEST(StageConfig, DefaultBodiesKeepEachKindsDefaults) {
  // GrpoStage's group defaults to 8; RlStage's (PPO's) to 1.
  EXPECT_EQ(std::get<GrpoStage>(default_body(StageKind::grpo)).group, 8);
  EXPECT_EQ(std::get<PpoStage>(default_body(StageKind::ppo)).group, 1);
}

TEST(StageConfig, RlViewExistsForGrpoAndPpoOnly) {
  GrpoStage g;
  g.policy = "policy";
  PpoStage p;
  p.policy = "actor";
  const StageConfig grpo = stage_of(g), ppo = stage_of(p);
  ASSERT_NE(grpo.rl(), nullptr);
  EXPECT_EQ(grpo.rl()->policy, "policy");
  ASSERT_NE(ppo.rl(), nullptr);
  EXPECT_EQ(ppo.rl()->policy, "actor");
  EXPECT_EQ(stage_of(SftStage{}).rl(), nullptr);
  EXPECT_EQ(stage_of(DistillStage{}).rl(), nullptr);
}

TEST(StageConfig, AsGivesTheBodyOfItsOwnKindOnly) {
  const StageConfig st = stage_of(SftStage{});
  EXPECT_NE(st.as<SftStage>(), nullptr);
  EXPECT_EQ(st.as<GrpoStage>(), nullptr);
}

TEST(StageConfig, UsedRolesAreTheTrainedOnesThenTheReadOnes) {
  PpoStage p;
  p.policy = "policy";
  p.critic = "critic";
  p.reference = "reference";
  EXPECT_EQ(stage_of(p).used_roles(), (std::vector<std::string>{"policy", "critic", "reference"}));
  GrpoStage g;
  g.policy = "policy";  // no reference
  EXPECT_EQ(stage_of(g).used_roles(), (std::vector<std::string>{"policy"}));
  DistillStage d;
  d.student = "student";
  d.teacher = "teacher";
  EXPECT_EQ(stage_of(d).trained_roles(), (std::vector<std::string>{"student"}));
  EXPECT_EQ(stage_of(d).used_roles(), (std::vector<std::string>{"student", "teacher"}));
}

TEST(StageConfig, SequencesPerStepAreTheBatchOrPromptsTimesGroup) {
  GrpoStage g;
  g.prompts = 4;
  g.group = 8;
  EXPECT_EQ(stage_of(g).sequences_per_step(), 32);  // 4 prompts × 8 responses
  SftStage s;
  s.batch = 64;
  EXPECT_EQ(stage_of(s).sequences_per_step(), 64);
}

TEST(StageConfig, StepsAreCountedInTheKindsOwnUnit) {
  PpoStage p;
  p.iterations = 30;
  EXPECT_EQ(stage_of(p).configured_steps(), 30);
  EXPECT_STREQ(stage_of(p).step_unit(), "iterations");
  DistillStage d;
  d.steps = 12;
  EXPECT_EQ(stage_of(d).configured_steps(), 12);
  EXPECT_STREQ(stage_of(d).step_unit(), "steps");
}

}  // namespace
