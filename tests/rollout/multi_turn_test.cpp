// Multi-turn generation (turns.h): a row that ends a turn waits for its reply
// while the other rows decode, and the reply is prefilled into its own cache.
// The handlers here are scripted over token ids (a turn ends on one of a few
// "call" ids, the reply is a function of the row's tokens), so every property
// is checked against the same computation done another way: the log-probs
// against one training forward of the whole trajectory, a trajectory against
// the one produced in another batch layout, with replies arriving later, or
// paused part-way and continued in a second call.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/util/error.h"
#include "rollout/rollout_testing.h"
#include "rollout/scripted_turns.h"

namespace {

using namespace hpcrl;
using hpcrl::testing::ScriptedTurns;

// docs/rollout.md holds log-probs within 1e-5 in fp32 for the engine tests'
// 20-token rows; over these 40-token trajectories of the ×10-weight random
// model (logits of magnitude ~30) fp32 rounding reaches 1.1e-5 at a few tokens.
// A reply missing from the cache, or cached at the wrong positions, is off by
// far more (the reply changes every later token's context).
constexpr double kFp32 = 2e-5;

rollout::SamplingParams sampled(int64_t max_new_tokens, uint64_t seed) {
  rollout::SamplingParams p;
  p.temperature = 1.0;
  p.max_new_tokens = max_new_tokens;
  p.seed = seed;
  p.eos_ids = {5, 11};
  return p;
}

rollout::EngineOptions slots(int64_t max_batch) { return hpcrl::testing::slots_read_every_step(max_batch); }

rollout::GenerationResult run_turns(std::shared_ptr<model::DecoderModel> m, int64_t max_batch,
                                    rollout::TurnHandler& turns, const std::vector<std::vector<int32_t>>& prompts,
                                    int64_t n, const rollout::SamplingParams& p, rollout::GenerateStats* stats = nullptr) {
  rollout::Engine engine(m, nullptr, slots(max_batch));
  auto result = engine.run(prompts, rollout::GenerationCall::fresh(int64_t(prompts.size()), n, &turns), p);
  if (stats) *stats = engine.last_stats();
  return result;
}

TEST(MultiTurn, EverySampledTokensLogprobIsOneForwardOfTheWholeTrajectory) {
  // 3 prompts × 3 samples of up to 40 tokens, replies inserted after every
  // call: each sampled token's log-prob equals the training forward over
  // prompt + all tokens, replies included (1e-5), so a reply prefilled into the
  // row's cache is what a fresh prefill of the trajectory computes; the reply
  // tokens are marked inserted, with log-prob 0.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  ScriptedTurns turns(/*delay_polls=*/2);
  rollout::GenerateStats stats;
  const auto out = run_turns(m, 4, turns, prompts, 3, sampled(40, 7), &stats);
  ASSERT_EQ(out.finished.size(), 9u);
  EXPECT_GT(stats.turn_calls, 3);
  EXPECT_GT(stats.reply_tokens, 0);
  EXPECT_EQ(stats.reply_tokens % 3, 0) << "every reply here is 3 tokens";
  int64_t checked = 0, inserted = 0;
  for (const auto& s : out.finished) {
    const auto want = hpcrl::testing::training_logprobs(*m, prompts[size_t(s.prompt_index)], s);
    ASSERT_TRUE(s.sampled.empty() || s.sampled.size() == s.tokens.size());
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      if (!s.was_sampled(t)) {
        EXPECT_EQ(s.logprobs[t], 0.0f);
        ++inserted;
        continue;
      }
      EXPECT_NEAR(s.logprobs[t], want[t], kFp32) << "prompt " << s.prompt_index << " sample " << s.sample_index
                                                 << " token " << t;
      ++checked;
    }
  }
  EXPECT_GT(inserted, 9);
  EXPECT_GT(checked, 100);
}

TEST(MultiTurn, ATrajectoryIsTheSameAtAnyBatchSizeAndReplyDelay) {
  // The same 4 prompts × 2 samples in 1 slot with replies at once, in 3 slots
  // with replies 5 polls late, and in 8 slots with replies 1 poll late: the
  // k-th sampled token draws Philox(seed; prompt, sample, k) whatever came
  // before, so the three runs give the same tokens (log-probs within 1e-5).
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({4, 7, 2, 6}, 96, 17);
  const auto p = sampled(32, 3);
  ScriptedTurns at_once(0), late(5), one_late(1);
  const auto a = run_turns(m, 1, at_once, prompts, 2, p).finished;
  const auto b = run_turns(m, 3, late, prompts, 2, p).finished;
  const auto c = run_turns(m, 8, one_late, prompts, 2, p).finished;
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  ASSERT_EQ(c.size(), 8u);
  int64_t turns = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    for (const auto* other : {&b[k], &c[k]})
      EXPECT_TRUE(hpcrl::testing::same_trajectory(a[k], *other, kFp32))
          << "prompt " << a[k].prompt_index << " sample " << a[k].sample_index;
    turns += a[k].turns;
  }
  EXPECT_GT(turns, 2);
}

TEST(MultiTurn, TheModelsOwnTokensDrawAsWithoutReplies) {
  // Greedy-free check of the draw keys: a row's sampled tokens before its
  // first call equal the single-turn sample's tokens up to that point.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({6, 3}, 96, 23);
  const auto p = sampled(30, 11);
  ScriptedTurns turns(1);
  const auto multi = run_turns(m, 4, turns, prompts, 3, p).finished;
  const auto single = rollout::Engine(m, nullptr, slots(4)).generate(prompts, 3, p);
  int64_t compared = 0;
  for (size_t k = 0; k < multi.size(); ++k) {
    const auto& s = multi[k];
    size_t first_call = 0;
    while (first_call < s.tokens.size() && !ScriptedTurns::is_call(s.tokens[first_call])) ++first_call;
    const size_t n = std::min(first_call + 1, single[k].tokens.size());
    EXPECT_EQ(std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + int64_t(n)),
              std::vector<int32_t>(single[k].tokens.begin(), single[k].tokens.begin() + int64_t(n)));
    compared += int64_t(n);
  }
  EXPECT_GT(compared, 20);
}

// One call for sample 0 of prompt 0 at its first token; the reply comes from a
// thread that sleeps `sleep`; every other row only decodes.
class SleepingTool : public rollout::TurnHandler {
 public:
  explicit SleepingTool(std::chrono::milliseconds sleep) : sleep_(sleep) {}
  bool ends_turn(const rollout::Sample& s) const override {
    return s.prompt_index == 0 && s.sample_index == 0 && s.turns == 0 && s.tokens.size() == 1;
  }
  void start(int64_t ticket, const rollout::Sample&) override {
    ticket_ = ticket;
    reply_ = std::async(std::launch::async, [this] {
      std::this_thread::sleep_for(sleep_);
      return rollout::TurnReply{{60, 61}, ""};
    });
  }
  std::vector<std::pair<int64_t, rollout::TurnReply>> poll(bool wait) override {
    if (!reply_.valid()) return {};
    if (!wait && reply_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return {};
    return {{ticket_, reply_.get()}};
  }

 private:
  std::chrono::milliseconds sleep_;
  int64_t ticket_ = -1;
  std::future<rollout::TurnReply> reply_;
};

TEST(MultiTurn, ASlowCallDoesNotStallTheOtherRows) {
  // Sample 0 calls a tool that takes 100 ms at its first token; the other 3
  // rows of the 4 slots go on decoding meanwhile: decode steps are taken while
  // the call runs (an engine that waited for the call would take none), and the
  // other rows' samples equal a single-turn run's.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 8}, 96, 29);
  rollout::SamplingParams p = sampled(40, 5);
  p.eos_ids.clear();
  SleepingTool tool(std::chrono::milliseconds(100));
  rollout::GenerateStats stats;
  const auto out = run_turns(m, 4, tool, prompts, 2, p, &stats).finished;
  EXPECT_EQ(stats.turn_calls, 1);
  EXPECT_GT(stats.decode_steps_during_calls, 0);
  const auto single = rollout::Engine(m, nullptr, slots(4)).generate(prompts, 2, p);
  for (size_t k = 1; k < out.size(); ++k) EXPECT_EQ(out[k].tokens, single[k].tokens) << "row " << k;
  ASSERT_EQ(out[0].tokens.size(), 40u);
  EXPECT_EQ(out[0].tokens[1], 60);  // the reply follows the first token
  EXPECT_EQ(out[0].tokens[2], 61);
  EXPECT_EQ(out[0].sampled_count(), 38);  // 40 tokens, 2 of them inserted
}

TEST(MultiTurn, AReplyThatEndsTheRowEndsItOnItsCall) {
  // max_turns 0: the first call's reply is "turns" (ScriptedTurns ends the row
  // once s.turns > max_turns), so every row that called ends on its call token
  // with that reason, nothing inserted.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  ScriptedTurns no_turns(0, /*max_turns=*/0);
  int64_t ended = 0;
  for (const auto& s : run_turns(m, 4, no_turns, prompts, 3, sampled(40, 7)).finished) {
    EXPECT_TRUE(s.sampled.empty());
    if (s.finish_reason != "turns") continue;
    EXPECT_TRUE(ScriptedTurns::is_call(s.tokens.back()));
    EXPECT_EQ(s.turns, 1);
    ++ended;
  }
  EXPECT_GT(ended, 0);
}

TEST(MultiTurn, AReplyWithNoRoomForASampledTokenAfterItEndsTheRowAtLength) {
  // The call comes at token 1 and its reply is 2 tokens. max_new_tokens 3
  // leaves room 2: the reply and one more token do not fit, the row ends
  // "length" with its 1 token. max_new_tokens 4: 1 + 2 inserted + 1 sampled.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  rollout::SamplingParams p = sampled(3, 5);
  p.eos_ids.clear();
  SleepingTool no_room(std::chrono::milliseconds(0));
  const auto short_run = run_turns(m, 2, no_room, {{7, 8, 9}}, 1, p).finished;
  ASSERT_EQ(short_run.size(), 1u);
  EXPECT_EQ(short_run[0].finish_reason, "length");
  EXPECT_EQ(short_run[0].tokens.size(), 1u);
  p.max_new_tokens = 4;
  SleepingTool room(std::chrono::milliseconds(0));
  const auto fits = run_turns(m, 2, room, {{7, 8, 9}}, 1, p).finished;
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].finish_reason, "length");
  EXPECT_EQ(fits[0].sampled, (std::vector<uint8_t>{1, 0, 0, 1}));
}

// Every row calls at its first token; each reply (2 tokens of its prompt) is ready at once.
class CallAtFirstToken : public rollout::TurnHandler {
 public:
  bool ends_turn(const rollout::Sample& s) const override { return s.turns == 0 && s.tokens.size() == 1; }
  void start(int64_t ticket, const rollout::Sample& s) override {
    ready_.push_back({ticket, {{int32_t(60 + s.prompt_index), int32_t(61 + s.prompt_index)}, ""}});
  }
  std::vector<std::pair<int64_t, rollout::TurnReply>> poll(bool) override { return std::move(ready_); }

 private:
  std::vector<std::pair<int64_t, rollout::TurnReply>> ready_;
};

TEST(MultiTurn, RepliesReadyTogetherArePrefilledInOneForward) {
  // 4 prompts of different lengths (2 to 9 tokens) in 4 slots: one prefill
  // forward for the prompts, every row calls at its first token, and the 4
  // replies (appended after caches of different lengths) take one more
  // forward, not 4; every sampled token's log-prob is still the whole
  // trajectory's forward.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({2, 9, 5, 7}, 96, 31);
  rollout::SamplingParams p = sampled(12, 9);
  p.eos_ids.clear();
  CallAtFirstToken calls;
  rollout::GenerateStats stats;
  const auto out = run_turns(m, 4, calls, prompts, 1, p, &stats).finished;
  EXPECT_EQ(stats.turn_calls, 4);
  EXPECT_EQ(stats.reply_tokens, 8);
  EXPECT_EQ(stats.prefill_forwards, 2);  // 1 for the prompts + 1 for the 4 replies
  for (const auto& s : out) {
    ASSERT_EQ(s.sampled, (std::vector<uint8_t>{1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
    const auto want = hpcrl::testing::training_logprobs(*m, prompts[size_t(s.prompt_index)], s);
    for (size_t t = 0; t < s.tokens.size(); ++t)
      if (s.was_sampled(t)) EXPECT_NEAR(s.logprobs[t], want[t], kFp32) << "prompt " << s.prompt_index << " token " << t;
  }
}

TEST(MultiTurn, APausedMultiTurnCallContinuesAsOneCall) {
  // Partial rollouts with tools: 6 prompts x 2 samples in 6 slots, replies 8 polls late, pause once a
  // prompt is done. Rows waiting for a reply at the pause take it first (appended, marked inserted)
  // and pause with the others; the second call prefills each prompt + tokens and continues. Every
  // trajectory equals the one-call run's: tokens, marks, turns and ending exact, log-probs within 2e-5.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({4, 7, 2, 6, 5, 3}, 96, 17);
  const auto p = sampled(32, 3);
  ScriptedTurns whole_turns(8);
  const auto whole = run_turns(m, 6, whole_turns, prompts, 2, p).finished;

  ScriptedTurns first_turns(8), second_turns(8);
  rollout::Engine engine(m, nullptr, slots(6));
  rollout::GenerationCall call = rollout::GenerationCall::fresh(6, 2, &first_turns);
  call.pause_after_groups = 1;
  rollout::GenerationResult first = engine.run(prompts, call, p);
  ASSERT_TRUE(engine.last_stats().paused);
  int64_t carried_replies = 0;  // paused samples whose last tokens are a reply
  for (const auto& s : first.paused) carried_replies += !s.tokens.empty() && !s.was_sampled(s.tokens.size() - 1);
  rollout::GenerationCall rest;
  rest.samples = first.paused;
  rest.turns = &second_turns;
  rollout::GenerationResult second = engine.run(prompts, rest, p);
  ASSERT_TRUE(second.paused.empty());
  std::map<std::pair<int64_t, int64_t>, rollout::Sample> got;
  for (auto* part : {&first.finished, &second.finished})
    for (const auto& s : *part) got[{s.prompt_index, s.sample_index}] = s;
  ASSERT_EQ(got.size(), whole.size());
  int64_t turns = 0;
  for (const auto& want : whole) {
    const auto& s = got.at({want.prompt_index, want.sample_index});
    EXPECT_TRUE(hpcrl::testing::same_trajectory(want, s, kFp32))
        << "prompt " << want.prompt_index << " sample " << want.sample_index;
    EXPECT_EQ(s.turns, want.turns);
    turns += want.turns;
  }
  EXPECT_GT(turns, 2);
  EXPECT_GT(carried_replies, 0) << "no row was waiting for a reply at the pause: the case is not covered";
}

}  // namespace
