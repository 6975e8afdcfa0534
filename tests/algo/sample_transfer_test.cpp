// Sample messages between generating replicas and trainer ranks: a message
// survives encoding unchanged, and whole groups are dealt over the trainer's dp
// ranks in global order.
#include <gtest/gtest.h>

#include "hpcrl/algo/training/sample_transfer.h"

using namespace hpcrl::algo;

TEST(SampleTransfer, AMessageSurvivesEncoding) {
  SampleMessage m;
  m.iteration = 7;
  m.version = 6;
  m.cursor.epoch = 2;
  m.cursor.index = 40;
  m.cursor.size = 200;
  m.round.kept.prompt_ids = {{1, 2, 3}, {1, 2, 3}};
  m.round.kept.response_ids = {{9, 8}, {}};
  m.round.kept.logprobs = {{-0.5f, -1.25f}, {}};
  m.round.kept.versions = {{4, 6}, {}};  // the first continued across two updates
  m.round.dropped_stale = 8;
  m.round.kept.example = {11, 11};
  m.round.kept.scores = {1.0, -0.5};
  m.round.kept.truncated = {false, true};
  m.round.totals.score = 0.5;
  m.round.totals.samples = 2;
  m.round.max_response_len = 2;
  m.round.seconds_by_span = {{"rollout", 0.25}, {"reward", 0.125}};
  m.wait_weights_seconds = 0.75;
  const SampleMessage back = decode_samples(encode_samples(m));
  EXPECT_TRUE(back == m);
  EXPECT_EQ(back.round.kept.response_ids[0], (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(back.round.kept.versions[0], (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(back.round.dropped_stale, 8);
  EXPECT_EQ(back.round.kept.truncated[1], true);
  EXPECT_EQ(back.cursor.index, 40u);
  EXPECT_EQ(back.round.seconds_by_span[1].first, "reward");
}

TEST(SampleTransfer, ACutMessageIsAnError) {
  auto bytes = encode_samples(SampleMessage{});
  bytes.pop_back();
  EXPECT_THROW(decode_samples(bytes), std::exception);
}

TEST(SampleTransfer, GroupsAreDealtInGlobalOrder) {
  // Two replicas with 4 groups each, trainer dp 2: replica 0 → dp 0, replica 1 → dp 1.
  EXPECT_EQ(trainer_share({4, 4}, 0, 2, 0).count, 4);
  EXPECT_EQ(trainer_share({4, 4}, 0, 2, 1).count, 0);
  EXPECT_EQ(trainer_share({4, 4}, 1, 2, 1).first, 0);
  EXPECT_EQ(trainer_share({4, 4}, 1, 2, 1).count, 4);
  // One replica of 6 groups, trainer dp 4: ⌊6j/4⌋ = 0, 1, 3, 4, 6 → 1, 2, 1, 2 groups.
  EXPECT_EQ(trainer_share({6}, 0, 4, 0).count, 1);
  EXPECT_EQ(trainer_share({6}, 0, 4, 1).first, 1);
  EXPECT_EQ(trainer_share({6}, 0, 4, 1).count, 2);
  EXPECT_EQ(trainer_share({6}, 0, 4, 3).first, 4);
  EXPECT_EQ(trainer_share({6}, 0, 4, 3).count, 2);
  // Uneven replicas (dynamic sampling): {3, 1} over dp 2 → dp 0: groups 0-1 of replica 0; dp 1: group 2 and replica 1's.
  EXPECT_EQ(trainer_share({3, 1}, 0, 2, 1).first, 2);
  EXPECT_EQ(trainer_share({3, 1}, 0, 2, 1).count, 1);
  EXPECT_EQ(trainer_share({3, 1}, 1, 2, 1).count, 1);
}
