// Partial rollouts' bookkeeping (stages/rollout_stream.h) and per-token
// staleness (training/token_staleness.h), on hand-made samples: which tokens
// get which version across two updates, which staleness each has when
// trained, what the next engine call continues, and that a group whose oldest
// token is staler than the bound is dropped, never trained on.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hpcrl/algo/stages/rollout_stream.h"
#include "hpcrl/algo/training/token_staleness.h"

namespace {

using namespace hpcrl;
using algo::RolloutStream;

rollout::Sample sample(int64_t prompt, int64_t index, std::vector<int32_t> tokens, std::string finish = "") {
  rollout::Sample s;
  s.prompt_index = prompt;
  s.sample_index = index;
  s.logprobs.assign(tokens.size(), -1.0f);
  s.tokens = std::move(tokens);
  s.finish_reason = std::move(finish);
  return s;
}

// Two groups of 2 samples: prompts {7, 8} (row 10, key 100) and {9} (row 11, key 101).
RolloutStream two_groups() {
  RolloutStream stream(2);
  stream.add({10, 11}, {{7, 8}, {9}}, {100, 101});
  return stream;
}

TEST(RolloutStream, TheFirstCallStartsEverySampleWithTheGroupsKeys) {
  RolloutStream stream = two_groups();
  const RolloutStream::Call c = stream.next_call(1);
  EXPECT_EQ(c.prompts, (std::vector<std::vector<int32_t>>{{7, 8}, {9}}));
  EXPECT_EQ(c.keys, (std::vector<int64_t>{100, 101}));
  EXPECT_EQ(c.call.pause_after_groups, 1);
  ASSERT_EQ(c.call.samples.size(), 4u);
  EXPECT_EQ(c.call.samples[2].prompt_index, 1);
  EXPECT_EQ(c.call.samples[2].sample_index, 0);
  EXPECT_TRUE(c.call.samples[2].tokens.empty());
}

TEST(RolloutStream, TokensKeepTheVersionThatSampledThemAcrossTwoUpdates) {
  // Version 3: group 0 ends (4 and 2 tokens); group 1's samples pause at 2 and 1 tokens.
  // Version 4: group 1 sample 0 adds 1 token and ends; sample 1 adds 2 and pauses.
  // Version 5: group 1 sample 1 adds 1 token and ends.
  RolloutStream stream = two_groups();
  auto c = stream.next_call(1);
  stream.take(c, {{sample(0, 0, {1, 2, 3, 4}, "stop"), sample(0, 1, {5, 6}, "stop")},
                  {sample(1, 0, {11, 12}), sample(1, 1, {21})}}, 3);
  EXPECT_EQ(stream.complete(), 1);
  const auto first = stream.take_complete(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].example, 10u);
  EXPECT_EQ(first[0].versions, (std::vector<std::vector<int32_t>>{{3, 3, 3, 3}, {3, 3}}));

  c = stream.next_call(1);  // only group 1 is left: it becomes prompt 0 of the call
  ASSERT_EQ(c.call.samples.size(), 2u);
  EXPECT_EQ(c.keys, (std::vector<int64_t>{101}));
  EXPECT_EQ(c.call.samples[0].tokens, (std::vector<int32_t>{11, 12}));
  stream.take(c, {{sample(0, 0, {11, 12, 13}, "length")}, {sample(0, 1, {21, 22, 23})}}, 4);
  c = stream.next_call(1);
  ASSERT_EQ(c.call.samples.size(), 1u);  // the finished sample is not continued
  stream.take(c, {{sample(0, 1, {21, 22, 23, 24}, "stop")}, {}}, 5);
  const auto second = stream.take_complete(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].versions, (std::vector<std::vector<int32_t>>{{3, 3, 4}, {3, 4, 4, 5}}));
  EXPECT_EQ(stream.in_flight(), 0);
}

TEST(RolloutStream, CompleteGroupsAreTakenInDrawOrder) {
  // Both groups end in one call; taking 1 takes the older (row 10), the other waits.
  RolloutStream stream = two_groups();
  auto c = stream.next_call(2);
  stream.take(c, {{sample(0, 0, {1}, "stop"), sample(0, 1, {2}, "stop"), sample(1, 0, {3}, "stop"),
                   sample(1, 1, {4}, "stop")}, {}}, 0);
  EXPECT_EQ(stream.take_complete(1)[0].example, 10u);
  EXPECT_EQ(stream.complete(), 1);
  EXPECT_EQ(stream.take_complete(5)[0].example, 11u);
}

TEST(RolloutStream, AGroupTooStaleToTrainIsDroppedBeforeItIsContinued) {
  // Group 0's oldest token has version 1, group 1 has none yet. Trained at
  // version 4 with max_staleness 2, group 0's token would be 4 - 1 = 3 stale:
  // dropped (2 samples); group 1 starts now and stays.
  RolloutStream stream = two_groups();
  auto c = stream.next_call(1);
  stream.take(c, {{}, {sample(0, 0, {1}), sample(0, 1, {2})}}, 1);
  EXPECT_EQ(stream.drop_stale(3, 2), 0);  // 3 - 1 = 2: still allowed
  EXPECT_EQ(stream.drop_stale(4, 2), 2);
  EXPECT_EQ(stream.in_flight(), 1);
  EXPECT_EQ(stream.next_call(1).keys, (std::vector<int64_t>{101}));
}

algo::RolloutSamples with_versions(std::vector<std::vector<int32_t>> versions) {
  algo::RolloutSamples s;
  for (const auto& v : versions) {
    s.prompt_ids.push_back({1});
    s.response_ids.emplace_back(v.size(), 5);
    s.logprobs.emplace_back(v.size(), -1.0f);
    s.example.push_back(0);
    s.scores.push_back(0);
    s.truncated.push_back(false);
  }
  s.versions = std::move(versions);
  return s;
}

TEST(TokenStaleness, EachTokenIsAsStaleAsTheUpdatesSinceItWasSampled) {
  // Trained at version 5, bound 2. Sample A: versions 3 3 4 5 → staleness 2 2 1 0;
  // sample B: 5 5 → 0 0. Tokens 6, Σ staleness 5: mean 5/6; staleness 0: 3 tokens,
  // 1: 1, 2: 2; max 2; A spans versions, B does not: 1/2.
  const auto counts = algo::staleness_counts(with_versions({{3, 3, 4, 5}, {5, 5}}), 5, 2);
  algo::RlMetrics m;
  algo::add_staleness_metrics(counts, m);
  std::map<std::string, double> got(m.extra.begin(), m.extra.end());
  EXPECT_DOUBLE_EQ(got.at("staleness/mean"), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(got.at("staleness/max"), 2);
  EXPECT_DOUBLE_EQ(got.at("staleness/spanning_samples"), 0.5);
  EXPECT_DOUBLE_EQ(got.at("staleness/tokens_0"), 3.0 / 6.0);
  EXPECT_DOUBLE_EQ(got.at("staleness/tokens_1"), 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(got.at("staleness/tokens_2"), 2.0 / 6.0);
}

TEST(TokenStaleness, AGroupHoldingATokenBeyondTheBoundIsNeverTrainedOn) {
  // Groups of 2 trained at version 5, bound 2: group 0 holds a token of version
  // 2 (5 - 2 = 3 > 2) in its second sample: both its samples go; group 1's
  // oldest token is version 3 (staleness 2): kept.
  algo::RolloutSamples kept = with_versions({{4, 5}, {2, 4}, {3}, {5}});
  EXPECT_EQ(algo::drop_stale_groups(kept, 2, 5, 2), 2);
  EXPECT_EQ(kept.versions, (std::vector<std::vector<int32_t>>{{3}, {5}}));
}

}  // namespace
