// Paused rows that keep their cache (GenerationCall::keep_paused_cache, the
// option behind async.keep_stale_cache): a row continued from its kept cache
// draws what one call would have drawn; after a weight update its prefix's
// keys/values stay the old weights' (a hand-made cached forward, old weights
// over the prefix and new weights over what follows, gives its log-probs),
// which is measurably not the re-prefilled cache; rows waiting for nothing
// else are not prefilled again; a cache that does not fit the sample is an
// input error.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
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

using hpcrl::testing::sampled_with_eos;

rollout::EngineOptions slots(int64_t max_batch) { return hpcrl::testing::slots_read_every_step(max_batch); }

// 3 prompts × 2 samples in 3 slots, pausing once one prompt is done, caches kept.
rollout::GenerationResult paused_with_caches(rollout::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                             const rollout::SamplingParams& p) {
  rollout::GenerationCall call = rollout::GenerationCall::fresh(3, 2);
  call.pause_after_groups = 1;
  call.keep_paused_cache = true;
  return engine.run(prompts, call, p);
}

TEST(KeptCache, ARowContinuedFromItsCacheDrawsWhatOneCallDraws) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  const rollout::SamplingParams p = sampled_with_eos(16, 7);
  const auto whole = rollout::Engine(m, nullptr, slots(3)).generate(prompts, 2, p);
  rollout::Engine engine(m, nullptr, slots(3));
  const rollout::GenerationResult first = paused_with_caches(engine, prompts, p);
  int64_t with_cache = 0;
  for (const auto& s : first.paused) {
    if (s.tokens.empty()) continue;  // never admitted: nothing cached
    ASSERT_TRUE(s.cache) << "a row paused part-way came back without its cache";
    EXPECT_EQ(s.cache->length, int64_t(prompts[size_t(s.prompt_index)].size() + s.tokens.size()) - 1);
    ++with_cache;
  }
  ASSERT_GT(with_cache, 0) << "no row was part-way at the pause";
  rollout::GenerationCall rest;
  rest.samples = first.paused;
  const rollout::GenerationResult second = engine.run(prompts, rest, p);
  EXPECT_EQ(engine.last_stats().cached_resumes, with_cache);
  EXPECT_EQ(engine.last_stats().resumed_tokens, 0);  // nothing generated was prefilled again
  std::map<std::pair<int64_t, int64_t>, rollout::Sample> got;
  for (const auto* list : {&first.finished, &second.finished})
    for (const auto& s : *list) got[{s.prompt_index, s.sample_index}] = s;
  ASSERT_EQ(got.size(), 6u);
  for (const auto& want : whole)
    EXPECT_TRUE(same_generation(*m, prompts[size_t(want.prompt_index)], want,
                                got.at({want.prompt_index, want.sample_index}), kFp32))
        << "prompt " << want.prompt_index << " sample " << want.sample_index;
}

// Log-probs of `tokens[from..]` after `prompt` through one KV cache: the prompt and tokens[0, from - 1) fed under
// the weights before `update`, then `update` applied, then every later token fed one at a time.
std::vector<double> stale_cache_logprobs(model::DecoderModel& m, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& tokens, size_t from,
                                         const std::function<void()>& update) {
  torch::NoGradGuard no_grad;
  model::KvCache cache = m.new_kv_cache();
  std::vector<int64_t> prefix(prompt.begin(), prompt.end());
  prefix.insert(prefix.end(), tokens.begin(), tokens.begin() + int64_t(from) - 1);
  m.forward(at::tensor(prefix, at::kLong).unsqueeze(0), {}, {}, &cache);
  update();
  std::vector<double> out;
  for (size_t t = from; t < tokens.size(); ++t) {
    const at::Tensor in = at::tensor(std::vector<int64_t>{tokens[t - 1]}, at::kLong).unsqueeze(0);
    const at::Tensor lp = m.local_logits(m.forward(in, {}, {}, &cache).hidden)[0][0].to(at::kDouble).log_softmax(0);
    out.push_back(lp[tokens[t]].item<double>());
  }
  return out;
}

TEST(KeptCache, AfterAWeightUpdateTheKeptPrefixKeepsTheOldWeightsKeysAndValues) {
  // Rows paused part-way under the old weights continue under weights ×0.95
  // from their kept caches. Each continued token's log-prob equals a cached
  // forward that fed the prefix under the old weights and every later token
  // under the new ones (1e-5), and differs from the new weights' fresh forward
  // over the whole sequence (what a re-prefill gives) by more than 1e-3 on
  // some token: the kept cache is stale, as documented.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({6, 4, 8}, 96, 52);
  const rollout::SamplingParams p = sampled_with_eos(20, 5);
  rollout::Engine engine(m, nullptr, slots(3));
  const rollout::GenerationResult first = paused_with_caches(engine, prompts, p);
  const auto scale = [](model::DecoderModel& model) {
    torch::NoGradGuard no_grad;
    for (auto& w : model.parameters()) w.mul_(0.95);
  };
  scale(*m);
  rollout::GenerationCall rest;
  rest.samples = first.paused;
  const auto done = engine.run(prompts, rest, p).finished;
  int64_t compared = 0;
  double most_off_fresh = 0;
  for (const auto& before : first.paused) {
    if (before.tokens.empty()) continue;
    const rollout::Sample* row = nullptr;
    for (const auto& s : done)
      if (s.prompt_index == before.prompt_index && s.sample_index == before.sample_index) row = &s;
    ASSERT_NE(row, nullptr);
    const size_t T = before.tokens.size();
    if (row->tokens.size() <= T) continue;
    const auto& prompt = prompts[size_t(row->prompt_index)];
    auto copy = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());  // the old weights (same seed)
    const auto want = stale_cache_logprobs(*copy, prompt, row->tokens, T, [&] { scale(*copy); });
    const auto fresh = hpcrl::testing::training_logprobs(*m, prompt, *row);
    for (size_t t = T; t < row->tokens.size(); ++t, ++compared) {
      EXPECT_NEAR(row->logprobs[t], want[t - T], kFp32) << "prompt " << row->prompt_index << " token " << t;
      most_off_fresh = std::max(most_off_fresh, std::abs(row->logprobs[t] - fresh[t]));
    }
  }
  EXPECT_GT(compared, 5);
  EXPECT_GT(most_off_fresh, 1e-3);
}

TEST(KeptCache, ACacheThatDoesNotFitTheSampleIsAnInputError) {
  // A sample of prompt [3 tokens] with 4 tokens needs a cache of 3 + 4 - 1 = 6 tokens.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto cache = std::make_shared<rollout::SlotCache>();
  cache->length = 5;
  rollout::GenerationCall call;
  call.samples.emplace_back();
  call.samples[0].tokens = {1, 2, 3, 4};
  call.samples[0].logprobs = {-1, -1, -1, -1};
  call.samples[0].cache = cache;
  std::string error;
  try {
    rollout::Engine(m, nullptr, slots(1)).run({{7, 8, 9}}, call, sampled_with_eos(8, 1));
  } catch (const InputError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("sample 0 has a kept cache of 5 tokens"), std::string::npos) << error;
  EXPECT_NE(error.find("need 6"), std::string::npos) << error;
}

}  // namespace
