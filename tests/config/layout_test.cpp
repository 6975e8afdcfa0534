// Layout arithmetic of one role (docs/communication.md): the divisibility rules with
// messages that list every factor, the smallest rank count a layout fits, the
// ranks a pipeline needs, and which ranks a role gets under each placement.
#include <gtest/gtest.h>

#include "hpcrl/config/layout.h"

using namespace hpcrl::config;

namespace {

ParallelConfig layout(int64_t tp, int64_t sp, int64_t ep, int64_t pp) {
  ParallelConfig p;
  p.tp = tp;
  p.sp = sp;
  p.ep = ep;
  p.pp = pp;
  return p;
}

std::vector<std::string> messages(const std::vector<LayoutProblem>& v) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(p.key + ": " + p.message + "; " + p.fix);
  return out;
}

TEST(Layout, ValidLayoutsHaveNoProblems) {
  hpcrl::ModelDims qwen{12, 2, 28, 0, 0, 151936, 1536, 8960};
  EXPECT_TRUE(check_layout(layout(2, 1, 1, 1), 8, &qwen).empty());
  EXPECT_TRUE(check_layout(layout(4, 1, 1, 2), 16, &qwen).empty());  // tp 4 > kv 2: kv replicated
  hpcrl::ModelDims moe{16, 4, 24, 60, 0, 151936, 2048, 5632};
  EXPECT_TRUE(check_layout(layout(2, 2, 4, 1), 16, &moe).empty());  // ep 4 | sp·dp = 2·4
  EXPECT_EQ(data_parallel_degree(layout(2, 2, 1, 2), 16), 2);
  EXPECT_EQ(data_parallel_degree(layout(3, 1, 1, 1), 16), 0);
}

// One process is one rank: tp = 2 there needs a launcher, and the fix says which command.
TEST(Layout, ALayoutOnOneProcessSuggestsTheLaunch) {
  EXPECT_EQ(messages(check_layout(layout(2, 1, 1, 1), 1, nullptr)),
            std::vector<std::string>{": tp·sp·pp = 2·1·1 = 2 does not divide the role's 1 ranks; choose tp, sp, pp "
                                     "whose product divides 1 (one of 1); dp = ranks / (tp·sp·pp); or launch 2 "
                                     "processes, one rank each: `mpirun -np 2 hpcrl run …` (or srun -n 2)"});
}

TEST(Layout, RankCountProblemsListEveryFactor) {
  EXPECT_EQ(messages(check_layout(layout(2, 1, 1, 3), 8, nullptr)),
            std::vector<std::string>{": tp·sp·pp = 2·1·3 = 6 does not divide the role's 8 ranks; choose tp, sp, pp "
                                     "whose product divides 8 (one of 1, 2, 4, 8); dp = ranks / (tp·sp·pp)"});
  EXPECT_EQ(messages(check_layout(layout(2, 1, 4, 1), 4, nullptr)),
            std::vector<std::string>{"ep: ep = 4 does not divide sp·dp = 1·2 = 2 (experts are sharded over the sp·dp "
                                     "ranks of each tp slot; dp = 4 / (tp·sp·pp = 2)); use an ep that divides 2 (one "
                                     "of 1, 2)"});
}

TEST(Layout, ModelProblemsListEveryFactor) {
  hpcrl::ModelDims dims{14, 6, 4, 0, 0, 1000, 896, 4864};
  EXPECT_EQ(messages(check_layout(layout(4, 1, 2, 8), 0, &dims)),
            (std::vector<std::string>{
                "tp: attention heads 14 are not divisible by tp·sp = 4·1 = 4 (heads % (tp·sp) = 2); use tp·sp that "
                "divides 14 (one of 1, 2, 7, 14)",
                "tp: kv-heads 6 and tp 4: neither divides the other (kv % tp = 2, tp % kv = 4); use a tp that divides 6 "
                "or is a multiple of it (KV heads are then replicated)",
                "pp: the model has 4 layers, fewer than pp·pp_virtual = 8·1 = 8 pipeline stages; use pp·pp_virtual ≤ 4",
                "ep: ep = 2 but the model is dense (no experts); set ep: 1"}));
  hpcrl::ModelDims moe{16, 4, 24, 60, 0, 0, 0, 0};
  EXPECT_EQ(messages(check_layout(layout(1, 1, 8, 1), 0, &moe)),
            std::vector<std::string>{"ep: experts 60 are not divisible by ep = 8; use an ep that divides 60 (one of "
                                     "1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)"});
  ParallelConfig split = layout(1, 1, 1, 2);
  split.pp_layers = {10, 12};
  hpcrl::ModelDims deep{16, 16, 24, 0, 0, 0, 0, 0};
  EXPECT_EQ(messages(check_layout(split, 0, &deep)),
            std::vector<std::string>{"pp_layers: pp_layers sum to 22 but the model has 24 layers; make the per-stage "
                                     "layer counts add up to 24"});
  hpcrl::ModelDims unknown{};  // no config.json: model checks are skipped
  EXPECT_TRUE(check_layout(layout(3, 1, 5, 9), 0, &unknown).empty());
}

TEST(Layout, GranularityIsTheSmallestFittingRankCount) {
  EXPECT_EQ(rank_granularity(layout(2, 1, 1, 1)), 2);
  EXPECT_EQ(rank_granularity(layout(2, 2, 4, 2)), 16);  // 2·2·lcm(2, 4)
  EXPECT_EQ(rank_granularity(layout(1, 3, 2, 1)), 6);
  for (int64_t ranks : {6, 12, 18})
    EXPECT_TRUE(check_layout(layout(1, 3, 2, 1), ranks, nullptr).empty()) << ranks;
  EXPECT_FALSE(check_layout(layout(1, 3, 2, 1), 3, nullptr).empty());
}

TEST(Layout, PlacementDecidesEachRolesRanks) {
  PipelineConfig c;
  ModelConfig policy;
  policy.name = "policy";
  policy.parallel = layout(2, 1, 1, 1);
  policy.rollout.parallel = layout(1, 1, 1, 1);
  ModelConfig critic;
  critic.name = "critic";
  critic.parallel = layout(1, 3, 1, 1);
  critic.rollout.parallel = critic.parallel;
  c.models = {policy, critic};
  RankNeeds colocated = ranks_needed(c);
  EXPECT_FALSE(colocated.exact);
  EXPECT_EQ(colocated.count, 6);  // lcm(2, 1, 3)
  EXPECT_EQ(ranks_of(c, "critic", 12).count, 12);

  c.placement.mode = PlacementMode::disaggregated;
  c.placement.ranges = {{"policy", 0, 3}, {"policy.rollout", 4, 7}, {"critic", 8, 10}};
  RankNeeds dis = ranks_needed(c);
  EXPECT_TRUE(dis.exact);
  EXPECT_EQ(dis.count, 11);
  EXPECT_EQ(ranks_of(c, "policy.rollout", 11).first, 4);
  EXPECT_EQ(ranks_of(c, "critic", 11).count, 3);
  EXPECT_EQ(ranks_of(c, "critic.rollout", 11).first, 8);  // no own range: the role's
}

}  // namespace
