// Samples paused part-way and continued (Engine::run): what partial rollouts
// across a weight update and multi-turn turns are built on. A sample paused and
// continued draws what one call would have drawn; continued after a weight
// update, its tokens are the prefix under the old weights followed by what the
// new weights give for that prefix (a re-prefilled cache, equal to a fresh
// forward); a call pauses at the first host read where the asked number of
// prompts are done; bad paused samples are input errors.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/util/error.h"
#include "rollout/rollout_testing.h"

namespace {

using namespace hpcrl;
using hpcrl::testing::same_generation;

constexpr double kFp32 = 1e-5;  // docs/rollout.md: log-probs within 1e-5 in fp32

rollout::SamplingParams sampled(int64_t max_new_tokens, uint64_t seed) {
  rollout::SamplingParams p;
  p.temperature = 1.0;
  p.max_new_tokens = max_new_tokens;
  p.seed = seed;
  return p;
}

rollout::SamplingParams greedy(int64_t max_new_tokens) {
  rollout::SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new_tokens;
  return p;
}

// n fresh samples of each of `prompts` prompts, prompt-major.
rollout::GenerationCall fresh_call(int64_t prompts, int64_t n, int64_t pause_after_groups) {
  rollout::GenerationCall call = rollout::GenerationCall::fresh(prompts, n);
  call.pause_after_groups = pause_after_groups;
  return call;
}

rollout::EngineOptions slots(int64_t max_batch) { return hpcrl::testing::slots_read_every_step(max_batch); }
using hpcrl::testing::sampled_with_eos;

int64_t part_way(const std::vector<rollout::Sample>& paused) {
  int64_t n = 0;
  for (const auto& s : paused) n += s.tokens.empty() ? 0 : 1;
  return n;
}

TEST(PausedSamples, APausedSampleContinuesWithTheDrawsOfOneCall) {
  // 3 prompts × 2 samples of up to 16 tokens in 3 slots: the call pauses once
  // one prompt's 2 samples are done, with other rows part-way. The second call
  // has only the paused samples' prompts, in another order, and keys them as
  // before (prompt_keys): every sample equals the one-call run's.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  const rollout::SamplingParams p = sampled_with_eos(16, 7);
  const auto whole = rollout::Engine(m, nullptr, slots(3)).generate(prompts, 2, p);

  rollout::Engine engine(m, nullptr, slots(3));
  rollout::GenerationResult first = engine.run(prompts, fresh_call(3, 2, 1), p);
  ASSERT_TRUE(engine.last_stats().paused);
  ASSERT_FALSE(first.paused.empty());
  ASSERT_GT(part_way(first.paused), 0) << "no sample was paused with tokens: nothing continued";

  // Prompts 2 and 1 become the second call's prompts 0 and 1; prompt 0's samples stay as numbered.
  const std::vector<std::vector<int32_t>> later = {prompts[2], prompts[1], prompts[0]};
  rollout::SamplingParams keyed = p;
  keyed.prompt_keys = {2, 1, 0};
  const auto renumber = [](int64_t prompt) { return 2 - prompt; };  // its own inverse
  rollout::GenerationCall rest;
  for (auto s : first.paused) {
    s.prompt_index = renumber(s.prompt_index);
    rest.samples.push_back(std::move(s));
  }
  rollout::GenerationResult second = engine.run(later, rest, keyed);
  ASSERT_TRUE(second.paused.empty());
  std::map<std::pair<int64_t, int64_t>, rollout::Sample> got;
  for (const auto& s : first.finished) got[{s.prompt_index, s.sample_index}] = s;
  for (const auto& s : second.finished) got[{renumber(s.prompt_index), s.sample_index}] = s;
  ASSERT_EQ(got.size(), 6u);
  for (const auto& want : whole) {
    const auto& s = got.at({want.prompt_index, want.sample_index});
    EXPECT_TRUE(same_generation(*m, prompts[size_t(want.prompt_index)], want, s, kFp32))
        << "prompt " << want.prompt_index << " sample " << want.sample_index;
  }
}

TEST(PausedSamples, AfterAWeightUpdateARowIsItsOldPrefixThenTheNewWeightsContinuation) {
  // A call of 3 prompts × 2 samples in 3 slots pauses after one prompt is done.
  // Each row paused part-way holds the old weights' tokens: the prefix of a
  // one-call run under them. The weights then change (×1.05, as an update
  // would) and the rows continue greedily: what follows each prefix is what a
  // greedy run under the new weights gives for prompt + prefix, recomputing the
  // whole sequence at every step.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({6, 4, 8}, 96, 52);
  const rollout::SamplingParams old_params = sampled_with_eos(20, 5);
  const auto old_whole = rollout::Engine(m, nullptr, slots(3)).generate(prompts, 2, old_params);
  rollout::Engine engine(m, nullptr, slots(3));
  const rollout::GenerationResult first = engine.run(prompts, fresh_call(3, 2, 1), old_params);
  ASSERT_GT(part_way(first.paused), 0) << "no row was part-way at the pause";
  for (const auto& s : first.paused) {
    const auto& old = old_whole[size_t(s.prompt_index * 2 + s.sample_index)];
    EXPECT_EQ(s.tokens, std::vector<int32_t>(old.tokens.begin(), old.tokens.begin() + int64_t(s.tokens.size())));
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& w : m->parameters()) w.mul_(1.05);
  }
  rollout::GenerationCall rest;
  rest.samples = first.paused;
  const auto done = engine.run(prompts, rest, greedy(20)).finished;
  ASSERT_EQ(done.size(), first.paused.size());
  int64_t continued = 0;
  for (size_t k = 0; k < done.size(); ++k) {
    const rollout::Sample& before = first.paused[k];
    const rollout::Sample& row = done[k];
    const size_t T = before.tokens.size();
    ASSERT_EQ(row.tokens.size(), 20u);  // greedy, no EOS: to max_new_tokens
    EXPECT_EQ(std::vector<int32_t>(row.tokens.begin(), row.tokens.begin() + int64_t(T)), before.tokens);
    EXPECT_EQ(std::vector<float>(row.logprobs.begin(), row.logprobs.begin() + int64_t(T)), before.logprobs);
    std::vector<int32_t> context = prompts[size_t(row.prompt_index)];
    context.insert(context.end(), before.tokens.begin(), before.tokens.end());
    const rollout::Sample reference = hpcrl::testing::reference_greedy(*m, context, int64_t(20 - T));
    rollout::Sample after;
    after.tokens.assign(row.tokens.begin() + int64_t(T), row.tokens.end());
    after.logprobs.assign(row.logprobs.begin() + int64_t(T), row.logprobs.end());
    after.finish_reason = row.finish_reason;
    EXPECT_TRUE(same_generation(*m, context, reference, after, kFp32)) << "prompt " << row.prompt_index;
    continued += int64_t(after.tokens.size());
  }
  EXPECT_GT(continued, 20);
}

TEST(PausedSamples, TheReprefilledCacheGivesTheFreshForwardsLogprobs) {
  // 3 part-way samples (4, 9 and 1 tokens sampled under the old weights) of 3
  // prompts, continued for 12 more tokens after the weights change: every
  // continued token's log-prob equals the new weights' training forward over
  // prompt + all tokens (1e-5), so the re-prefilled keys/values are the new
  // weights' — a cache kept from the old weights would be off by the update.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 2, 11}, 96, 63);
  const std::vector<int64_t> done_before = {4, 9, 1};
  rollout::GenerationCall call;
  for (int64_t p = 0; p < 3; ++p) {
    rollout::Sample s = rollout::Engine(m, nullptr, slots(1)).generate({prompts[size_t(p)]}, 1,
                                                                        sampled(done_before[size_t(p)], 9))[0];
    s.prompt_index = p;
    s.finish_reason.clear();
    call.samples.push_back(s);
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& w : m->parameters()) w.mul_(0.95);
  }
  rollout::Engine engine(m, nullptr, slots(3));
  const auto done = engine.run(prompts, call, sampled(21, 9)).finished;
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(engine.last_stats().resumed_tokens, 4 + 9 + 1);
  int64_t compared = 0;
  for (const auto& s : done) {
    const auto want = hpcrl::testing::training_logprobs(*m, prompts[size_t(s.prompt_index)], s);
    for (size_t t = size_t(done_before[size_t(s.prompt_index)]); t < s.tokens.size(); ++t, ++compared)
      EXPECT_NEAR(s.logprobs[t], want[t], kFp32) << "prompt " << s.prompt_index << " token " << t;
  }
  EXPECT_EQ(compared, 3 * 21 - (4 + 9 + 1));  // every sample ran to 21 tokens
}

TEST(PausedSamples, ACallPausesAtTheFirstReadWhereTheGroupsAreDone) {
  // 4 prompts × 2 samples, all 8 in 8 slots from the start, sampled with EOS,
  // at most 24 tokens, tokens read every step. A prompt is done when its
  // longest sample ends; the call asked to pause after 2 prompts stops right at
  // the step where the second-earliest prompt ends: every paused sample has
  // exactly that many tokens.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({3, 7, 4, 9}, 96, 74);
  const rollout::SamplingParams p = sampled_with_eos(24, 4);
  const auto whole = rollout::Engine(m, nullptr, slots(8)).generate(prompts, 2, p);
  std::vector<size_t> prompt_done(4, 0);
  for (const auto& s : whole) prompt_done[size_t(s.prompt_index)] = std::max(prompt_done[size_t(s.prompt_index)], s.tokens.size());
  std::vector<size_t> sorted = prompt_done;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_LT(sorted[1], sorted[3]) << "every prompt ends together: the pause would leave nothing part-way";

  rollout::Engine engine(m, nullptr, slots(8));
  const auto r = engine.run(prompts, fresh_call(4, 2, 2), p);
  EXPECT_TRUE(engine.last_stats().paused);
  ASSERT_FALSE(r.paused.empty());
  for (const auto& s : r.paused) EXPECT_EQ(s.tokens.size(), sorted[1]) << "prompt " << s.prompt_index;
  std::map<int64_t, int64_t> finished_of;
  for (const auto& s : r.finished) ++finished_of[s.prompt_index];
  int64_t complete = 0;
  for (const auto& [prompt, count] : finished_of) complete += count == 2 ? 1 : 0;
  EXPECT_GE(complete, 2);
  EXPECT_EQ(r.finished.size() + r.paused.size(), 8u);
}

TEST(PausedSamples, AContinuedSampleStillEndsAtMaxNewTokens) {
  // 5 tokens already, max_new_tokens 8: 3 more, then "length".
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({4}, 96, 85);
  rollout::Sample s = rollout::Engine(m, nullptr, slots(1)).generate(prompts, 1, greedy(5))[0];
  s.finish_reason.clear();
  rollout::GenerationCall call;
  call.samples = {s};
  const auto done = rollout::Engine(m, nullptr, slots(1)).run(prompts, call, greedy(8)).finished;
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tokens.size(), 8u);
  EXPECT_EQ(done[0].finish_reason, "length");
}

using hpcrl::testing::input_error_of;

TEST(PausedSamples, ABadPausedSampleIsAnInputErrorSayingWhatToFix) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  rollout::Engine engine(m, nullptr, slots(2));
  const auto prompts = hpcrl::testing::random_prompts({4}, 96, 86);
  const auto with = [&](rollout::Sample s, rollout::SamplingParams p) {
    rollout::GenerationCall call;
    call.samples = {std::move(s)};
    return input_error_of([&] { engine.run(prompts, call, p); });
  };
  rollout::Sample outside;
  outside.prompt_index = 1;
  EXPECT_NE(with(outside, greedy(4)).find("sample 0 is of prompt 1, outside the call's 1 prompts"), std::string::npos);
  rollout::Sample full;
  full.tokens = {1, 2, 3, 4};
  full.logprobs = {-1, -1, -1, -1};
  EXPECT_NE(with(full, greedy(4)).find("has 4 tokens, max_new_tokens is 4: nothing is left"), std::string::npos);
  rollout::Sample unmatched;
  unmatched.tokens = {1, 2};
  unmatched.logprobs = {-1};
  EXPECT_NE(with(unmatched, greedy(4)).find("1 log-probs for 2 tokens"), std::string::npos);
  rollout::Sample ended;
  ended.finish_reason = "stop";
  EXPECT_NE(with(ended, greedy(4)).find("has finished (stop)"), std::string::npos);
  rollout::SamplingParams keys = greedy(4);
  keys.prompt_keys = {0, 1};
  EXPECT_NE(with(rollout::Sample{}, keys).find("prompt_keys has 2 keys for 1 prompts"), std::string::npos);
}

}  // namespace
