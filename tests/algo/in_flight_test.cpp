// A disaggregated stage's in-flight state as checkpoint files
// (stages/in_flight.h): what is written reads back equal, and a damaged or
// foreign file is an input error naming it.
#include <gtest/gtest.h>

#include "hpcrl/algo/stages/in_flight.h"

namespace {

using namespace hpcrl;
using namespace hpcrl::algo;

GeneratorSnapshot two_groups() {
  GeneratorSnapshot g;
  g.cursor = {2, 17, 5, 100, 0xabc};  // epoch 2, index 17, seed 5, size 100
  GroupInFlight a;
  a.example = 42;
  a.prompt_ids = {7, 8};
  a.key = 317;
  a.samples.resize(2);
  a.samples[0].sample_index = 0;
  a.samples[0].tokens = {1, 2, 3};
  a.samples[0].logprobs = {-0.5f, -1.25f, -2.0f};
  a.samples[0].finish_reason = "stop";
  a.samples[1].sample_index = 1;
  a.samples[1].tokens = {4, 5};
  a.samples[1].logprobs = {-0.75f, 0.0f};
  a.samples[1].sampled = {1, 0};  // its second token a tool's reply
  a.samples[1].turns = 1;
  a.versions = {{3, 3, 4}, {4, 4}};
  GroupInFlight b;
  b.example = 43;
  b.prompt_ids = {9};
  b.key = 318;
  b.samples.resize(2);
  b.versions.resize(2);
  g.groups = {a, b};
  return g;
}

void expect_same(const rollout::Sample& x, const rollout::Sample& y) {
  EXPECT_EQ(x.prompt_index, y.prompt_index);
  EXPECT_EQ(x.sample_index, y.sample_index);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.logprobs, y.logprobs);
  EXPECT_EQ(x.sampled, y.sampled);
  EXPECT_EQ(x.finish_reason, y.finish_reason);
  EXPECT_EQ(x.turns, y.turns);
}

TEST(InFlight, AGeneratorSnapshotReadsBackEqual) {
  const GeneratorSnapshot g = two_groups();
  const GeneratorSnapshot back = decode_generator(encode_generator(g), "gen.bin");
  EXPECT_EQ(back.cursor, g.cursor);
  ASSERT_EQ(back.groups.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(back.groups[k].example, g.groups[k].example);
    EXPECT_EQ(back.groups[k].prompt_ids, g.groups[k].prompt_ids);
    EXPECT_EQ(back.groups[k].key, g.groups[k].key);
    EXPECT_EQ(back.groups[k].versions, g.groups[k].versions);
    ASSERT_EQ(back.groups[k].samples.size(), 2u);
    for (size_t s = 0; s < 2; ++s) expect_same(back.groups[k].samples[s], g.groups[k].samples[s]);
  }
}

TEST(InFlight, AnInboxReadsBackEqualInIterationOrder) {
  std::map<int64_t, SampleMessage> inbox;
  for (int64_t it : {5, 4}) {
    SampleMessage m;
    m.iteration = it;
    m.version = it - 1;
    m.round.kept.prompt_ids = {{1, 2}};
    m.round.kept.response_ids = {{3}};
    m.round.kept.logprobs = {{-0.5f}};
    m.round.kept.versions = {{int32_t(it - 1)}};
    m.round.kept.sampled = {{}};
    m.round.kept.example = {size_t(it)};
    m.round.kept.scores = {1.0};
    m.round.kept.truncated = {false};
    inbox.emplace(it, m);
  }
  const auto back = decode_inbox(encode_inbox(inbox), "inbox.bin");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.begin()->first, 4);
  EXPECT_TRUE(back.at(4) == inbox.at(4));
  EXPECT_TRUE(back.at(5) == inbox.at(5));
}

std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(InFlight, ACutFileIsAnInputErrorNamingIt) {
  auto bytes = encode_generator(two_groups());
  bytes.resize(bytes.size() - 3);
  const std::string e = input_error_of([&] { decode_generator(bytes, "step-000004/gen.bin"); });
  EXPECT_NE(e.find("step-000004/gen.bin: in-flight file cut short"), std::string::npos) << e;
  EXPECT_NE(e.find("resume from an earlier step directory"), std::string::npos) << e;
}

TEST(InFlight, AnInboxFileIsNotTakenForAGeneratorsFile) {
  const auto bytes = encode_inbox({});
  const std::string e = input_error_of([&] { decode_generator(bytes, "gen.bin"); });
  EXPECT_NE(e.find("gen.bin: in-flight file of another kind or version"), std::string::npos) << e;
}

TEST(InFlight, FilesAreNamedByRankAndReplica) {
  EXPECT_EQ(inbox_file(3), "in-flight/trainer-rank-00003.bin");
  EXPECT_EQ(generator_file(1), "in-flight/generator-rank-00001.bin");
}

TEST(InFlight, ThePointReadsBackAndAMissingFieldNamesTheFile) {
  InFlightPoint p;
  p.plan_start = 0;
  p.plan_staleness = 1;
  p.sync_iteration = 6;
  p.world = 2;
  p.trainer_dp = 1;
  p.generator_dp = 1;
  const InFlightPoint back = InFlightPoint::from_json(p.to_json(), "state.json");
  EXPECT_EQ(back.sync_iteration, 6);
  EXPECT_TRUE(back.same_layout(p));
  nlohmann::json j = p.to_json();
  j.erase("world");
  const std::string e = input_error_of([&] { InFlightPoint::from_json(j, "s/state.json"); });
  EXPECT_NE(e.find("s/state.json: \"in_flight\" needs an integer \"world\""), std::string::npos) << e;
}

}  // namespace
