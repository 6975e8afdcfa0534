// The rollout engine on one rank: KV-cache decoding equals recomputing the
// whole sequence, the log-probs it returns equal the training forward's, a
// sample does not depend on which sequences share its batch (continuous or
// static batching, refills), the n samples of a prompt share one prefill, stop
// strings cut where the text first contains them, and bad input is rejected
// with a message that says what to fix.
//
// Tolerances. docs/rollout.md's tolerance: log-probs within 1e-5 in fp32. The random
// Qwen2-shaped model meets that. The trained stories260k model (logits up to
// ~15) does not leave room for it: its own training forward moves a token's
// log-prob by up to 1.3e-5 when the batch gains a longer padded row (measured:
// 3 of 180 tokens above 1e-5), so fp32 can only bound the engine by that noise
// floor (kStoriesFp32). The exactness of the engine's computation is checked
// on stories260k in float64 (attention's softmax still runs in fp32 there, see
// model/attention_kernel.cpp, so runs agree to ~2e-6, not 1e-12): any real
// difference — padding leakage, a wrong position, a stale cache column — is
// orders of magnitude above the 5e-6 used.
#include <gtest/gtest.h>

#include <cstdio>
#include <torch/utils.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/slot_projections.h"
#include "hpcrl/util/error.h"
#include "rollout/rollout_testing.h"

namespace {

using namespace hpcrl;
using hpcrl::testing::same_generation;

constexpr double kFp32 = 1e-5;         // docs/rollout.md
constexpr double kFloat64 = 5e-6;      // float64 model (fp32 attention softmax inside, see above)
constexpr double kStoriesFp32 = 3e-5;  // stories260k's fp32 noise floor, see above

std::shared_ptr<model::DecoderModel> stories64() {
  auto m = hpcrl::testing::stories();
  m->to(at::kDouble);
  return m;
}

// SamplingParams with the settings a test varies named at the call:
//   greedy().max_new_tokens(12).eos({2}),  sampled().max_new_tokens(24).seed(4).eos({2}).
// Converts to rollout::SamplingParams wherever one is taken.
class Sampling {
 public:
  explicit Sampling(rollout::SamplingParams p) : p_(std::move(p)) {}
  Sampling& max_new_tokens(int64_t n) {
    p_.max_new_tokens = n;
    return *this;
  }
  Sampling& seed(uint64_t s) {
    p_.seed = s;
    return *this;
  }
  Sampling& eos(std::vector<int32_t> ids) {
    p_.eos_ids = std::move(ids);
    return *this;
  }
  operator rollout::SamplingParams() const { return p_; }

 private:
  rollout::SamplingParams p_;
};

// Temperature 0: the argmax token.
Sampling greedy() {
  rollout::SamplingParams p;
  p.temperature = 0;
  return Sampling(p);
}

// Temperature 1 with nucleus sampling, top_p 0.95.
Sampling sampled() {
  rollout::SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.95;
  return Sampling(p);
}

// Prompts that start with stories260k's BOS (1), of mixed lengths.
std::vector<std::vector<int32_t>> story_prompts(const std::vector<int64_t>& lengths, uint64_t seed) {
  auto prompts = hpcrl::testing::random_prompts(lengths, 512, seed);
  for (auto& p : prompts) p[0] = 1;
  return prompts;
}

// What expect_matches_reference runs and asserts; each call sets every field by name.
struct ReferenceCheck {
  int64_t max_new_tokens = 0;
  std::vector<int32_t> eos;         // ids that end a sample (none: every sample runs max_new_tokens)
  int64_t max_batch = 0;            // the engine's slots
  double tolerance = 0;             // log-prob tolerance of same_generation
  int64_t min_tokens_compared = 0;  // coverage floor: generated tokens compared, all prompts together
};

// Greedy decoding with the engine's KV cache, one sample per prompt, against
// reference_greedy (the whole sequence recomputed at every step).
void expect_matches_reference(model::DecoderModel& m, const std::vector<std::vector<int32_t>>& prompts,
                              const ReferenceCheck& check) {
  auto shared = std::shared_ptr<model::DecoderModel>(&m, [](model::DecoderModel*) {});
  rollout::Engine engine(shared, nullptr, {check.max_batch, true});
  auto samples = engine.generate(prompts, 1, greedy().max_new_tokens(check.max_new_tokens).eos(check.eos));
  ASSERT_EQ(samples.size(), prompts.size());
  int64_t compared = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    rollout::Sample ref = hpcrl::testing::reference_greedy(m, prompts[p], check.max_new_tokens, check.eos);
    EXPECT_TRUE(same_generation(m, prompts[p], ref, samples[p], check.tolerance)) << "prompt " << p;
    compared += int64_t(samples[p].tokens.size());
  }
  EXPECT_GE(compared, check.min_tokens_compared) << "the comparison covered too little decoding";
}

TEST(RolloutEngine, Stories260kGreedyWithCacheEqualsRecomputingEachStep) {
  auto m = stories64();
  ReferenceCheck check;
  check.max_new_tokens = 28;
  check.eos = {2};      // stories260k's EOS
  check.max_batch = 3;  // < 5 prompts: slots are refilled while others decode
  check.tolerance = kFloat64;
  check.min_tokens_compared = 20;  // 5 prompts × 4: the samples decoded, not just ended on an early EOS
  expect_matches_reference(*m, story_prompts({1, 6, 17, 3, 22}, 5), check);
}

TEST(RolloutEngine, Qwen2ShapedGreedyWithCacheEqualsRecomputingEachStep) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  ReferenceCheck batched;
  batched.max_new_tokens = 32;
  batched.eos = {};  // none: every sample runs 32 tokens
  batched.max_batch = 2;
  batched.tolerance = kFp32;
  batched.min_tokens_compared = 16;  // 4 prompts × 4: the comparison covered real decoding
  expect_matches_reference(*m, hpcrl::testing::random_prompts({2, 9, 25, 4}, 96, 8), batched);
  // One live row: the single-token (GEMV) path of every step.
  ReferenceCheck one_row;
  one_row.max_new_tokens = 24;
  one_row.eos = {};  // none: the sample runs 24 tokens
  one_row.max_batch = 1;
  one_row.tolerance = kFp32;
  one_row.min_tokens_compared = 4;  // 1 prompt × 4: the comparison covered real decoding
  expect_matches_reference(*m, hpcrl::testing::random_prompts({7}, 96, 9), one_row);
}

// log p(token) of prompt+response under a batched, right-padded training forward.
// temperature: of softmax(logits / temperature), as the RL update takes them (hidden / τ: the head has no bias).
std::vector<std::vector<float>> training_logprobs(model::DecoderModel& m,
                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                  const std::vector<rollout::Sample>& samples, double temperature = 1.0) {
  int64_t T = 0;
  for (const auto& s : samples) T = std::max<int64_t>(T, prompts[s.prompt_index].size() + s.tokens.size());
  const int64_t N = int64_t(samples.size());
  at::Tensor ids = at::zeros({N, T}, at::kLong), targets = at::zeros({N, T}, at::kLong);
  at::Tensor mask = at::zeros({N, T}, at::kLong);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int32_t> seq = prompts[samples[i].prompt_index];
    seq.insert(seq.end(), samples[i].tokens.begin(), samples[i].tokens.end());
    for (size_t t = 0; t < seq.size(); ++t) {
      ids[i][t] = seq[t];
      mask[i][t] = 1;
      if (t + 1 < seq.size()) targets[i][t] = seq[t + 1];
    }
  }
  m.train();
  auto out = m.forward(ids, {}, mask);
  at::Tensor lp = m.token_logprobs(out.hidden / temperature, targets, /*with_entropy=*/false).logprobs.detach();  // [N, T]
  m.eval();
  std::vector<std::vector<float>> result;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t P = int64_t(prompts[samples[i].prompt_index].size());
    std::vector<float> v;
    for (size_t t = 0; t < samples[i].tokens.size(); ++t) v.push_back(lp[i][P - 1 + int64_t(t)].item<float>());
    result.push_back(v);
  }
  return result;
}

// What expect_training_logprobs asserts; each call sets both fields by name.
struct LogprobCheck {
  double tolerance = 0;          // per token: |the engine's log-prob − the training forward's|
  int64_t more_tokens_than = 0;  // coverage floor: more tokens than this compared, all samples together
};

// n = 2 samples per prompt from an engine of 4 slots; every token's log-prob
// against training_logprobs of the same sequences.
void expect_training_logprobs(std::shared_ptr<model::DecoderModel> m, const std::vector<std::vector<int32_t>>& prompts,
                              const rollout::SamplingParams& params, const LogprobCheck& check) {
  rollout::Engine engine(m, nullptr, {4, true});
  auto samples = engine.generate(prompts, 2, params);
  auto want = training_logprobs(*m, prompts, samples, params.logprobs_at_temperature ? params.temperature : 1.0);
  int64_t checked = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    ASSERT_EQ(samples[i].logprobs.size(), samples[i].tokens.size());
    for (size_t t = 0; t < samples[i].tokens.size(); ++t, ++checked)
      EXPECT_NEAR(samples[i].logprobs[t], want[i][t], check.tolerance) << "sample " << i << " token " << t;
  }
  EXPECT_GT(checked, check.more_tokens_than) << "the comparison covered too little decoding";
}

TEST(RolloutEngine, LogprobsEqualTheTrainingForward) {
  // Each call: 3 prompts × 2 samples of up to 20 (qwen, no EOS) or 24 (stories, EOS 2)
  // tokens; more than 20 tokens compared: real decoding, not samples that all ended early.
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  LogprobCheck fp32;
  fp32.tolerance = kFp32;
  fp32.more_tokens_than = 20;
  expect_training_logprobs(qwen, hpcrl::testing::random_prompts({5, 14, 2}, 96, 22),
                           sampled().max_new_tokens(20).seed(5), fp32);
  LogprobCheck float64;
  float64.tolerance = kFloat64;
  float64.more_tokens_than = 20;
  expect_training_logprobs(stories64(), story_prompts({3, 12, 7}, 21), sampled().max_new_tokens(24).seed(4).eos({2}),
                           float64);
  LogprobCheck stories_fp32;
  stories_fp32.tolerance = kStoriesFp32;
  stories_fp32.more_tokens_than = 20;
  expect_training_logprobs(hpcrl::testing::stories(), story_prompts({3, 12, 7}, 21),
                           sampled().max_new_tokens(24).seed(4).eos({2}), stories_fp32);
}

TEST(RolloutEngine, Qwen3ShapedLogprobsEqualTheTrainingForward) {
  // Per-head q/k norms before RoPE (the CPU decode step runs them through the
  // model's modules), the packed GEMMs and the CPU row sampler (no top-p).
  const ModelArch arch = hpcrl::testing::test_arch(hpcrl::testing::qwen2_arch()).family("qwen3").qk_norm(true).build();
  auto qwen3 = hpcrl::testing::random_model(arch);
  rollout::SamplingParams params = sampled().max_new_tokens(20).seed(5);
  params.top_p = 1.0;
  LogprobCheck fp32;
  fp32.tolerance = kFp32;
  fp32.more_tokens_than = 20;  // of up to 3 prompts × 2 samples × 20 tokens
  expect_training_logprobs(qwen3, hpcrl::testing::random_prompts({5, 14, 2}, 96, 22), params, fp32);
}

// A bf16 model decoding one row at a time: its projections go through the bf16
// row GEMV (float32 sums rounded once, as LibTorch's bf16 linear rounds them),
// the rest through the model's bf16 modules. Measured: at most 0.11 from the
// bf16 training forward's log-probs, whose bf16 activations round in other
// places; through at::mv, before the bf16 row GEMV, 0.21.
TEST(RolloutEngine, ABf16ModelDecodingOneRowFollowsTheBf16TrainingForward) {
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  qwen->to(at::kBFloat16);
  const auto prompts = hpcrl::testing::random_prompts({5, 14, 2}, 96, 22);
  const rollout::SamplingParams params = sampled().max_new_tokens(20).seed(5);
  rollout::Engine engine(qwen, nullptr, {1, true});  // one slot: every step decodes a single row
  auto samples = engine.generate(prompts, 1, params);
  auto want = training_logprobs(*qwen, prompts, samples, 1.0);
  double worst = 0, total = 0;
  int64_t checked = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    for (size_t t = 0; t < samples[i].tokens.size(); ++t, ++checked) {
      const double d = std::abs(samples[i].logprobs[t] - want[i][t]);
      worst = std::max(worst, d);
      total += d;
    }
  EXPECT_GT(checked, 20);
  // The training forward's bf16 GEMMs are LibTorch's, whose rounding depends on the processor:
  // worst 0.11 on an Intel Xeon (AVX-512), 0.39 on an AMD EPYC (AVX2), where the mean is 0.042.
  EXPECT_LT(worst, 0.5) << "over " << checked << " tokens";
  EXPECT_LT(total / double(checked), 0.1) << "mean over " << checked << " tokens";
  std::printf("bf16 row decode vs training forward: worst %.4f, mean %.4f over %lld tokens\n", worst,
              total / double(checked), static_cast<long long>(checked));
}

// What the RL stages ask for: log-probs of the tempered distribution responses are sampled from.
TEST(RolloutEngine, TemperedLogprobsEqualTheTrainingForwardAtThatTemperature) {
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  rollout::SamplingParams params = sampled().max_new_tokens(20).seed(5);
  params.temperature = 0.7;
  params.logprobs_at_temperature = true;
  LogprobCheck fp32;
  fp32.tolerance = kFp32;
  fp32.more_tokens_than = 20;  // of up to 3 prompts × 2 samples × 20 tokens
  expect_training_logprobs(qwen, hpcrl::testing::random_prompts({5, 14, 2}, 96, 22), params, fp32);
  // ... and they are not the untempered ones.
  rollout::Engine engine(qwen, nullptr, {4, true});
  auto prompts = hpcrl::testing::random_prompts({5, 14, 2}, 96, 22);
  auto samples = engine.generate(prompts, 1, params);
  auto untempered = training_logprobs(*qwen, prompts, samples, 1.0);
  double diff = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    for (size_t t = 0; t < samples[i].tokens.size(); ++t) diff += std::abs(samples[i].logprobs[t] - untempered[i][t]);
  EXPECT_GT(diff, 0.1);
}

// The engine keeps its packed copy of the weights from call to call; every
// call must still compute with the weights the trainer holds at that moment.
TEST(RolloutEngine, UsesTheTrainersCurrentWeightsAtEveryCall) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());  // q/k/v biases: packed too
  rollout::Engine engine(m, nullptr, {4, true});
  auto prompts = hpcrl::testing::random_prompts({6, 3}, 96, 30);
  auto before = engine.generate(prompts, 1, sampled().max_new_tokens(12).seed(3));
  engine.generate({prompts[0]}, 1, greedy().max_new_tokens(2));  // one row: the packed copy is not used
  {  // an optimizer step would do this to the trainer's parameters
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.mul_(1.05);
  }
  auto after = engine.generate(prompts, 1, sampled().max_new_tokens(12).seed(3));
  auto want = training_logprobs(*m, prompts, after);
  for (size_t i = 0; i < after.size(); ++i)
    for (size_t t = 0; t < after[i].tokens.size(); ++t) EXPECT_NEAR(after[i].logprobs[t], want[i][t], kFp32);
  EXPECT_NE(before[0].logprobs[0], after[0].logprobs[0]);
  // Exactly what a new engine computes on a model of the same weights (another
  // model object: engines on one model share its packed copy).
  auto twin = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : twin->parameters()) p.mul_(1.05);
  }
  auto fresh = rollout::Engine(twin, nullptr, {4, true}).generate(prompts, 1, sampled().max_new_tokens(12).seed(3));
  ASSERT_EQ(fresh.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].tokens, fresh[i].tokens) << "sample " << i;
    EXPECT_EQ(after[i].logprobs, fresh[i].logprobs) << "sample " << i;
  }
}

// A LoRA policy generates with its adapters: the engine merges them into the
// weights it multiplies by at every call (packed for many rows, in place for
// one), and its log-probs are the training forward's, which adds the low-rank
// product unmerged. After an update of the factors the next call follows.
TEST(RolloutEngine, ALoraModelGeneratesWithItsCurrentAdapters) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  model::attach_lora(*m, {{4, 8, 0.0}, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
                     1);
  auto randomise = [&](uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    std::map<std::string, at::Tensor> factors;
    for (const auto& p : m->named_parameters())
      if (parallel::tensor::is_lora_tensor(p.key())) factors[p.key()] = at::empty(p.value().sizes()).normal_(0, 0.2, gen);
    model::load_weights(*m, factors, "random factors", model::AdapterView::adapter);
  };
  randomise(5);
  auto prompts = hpcrl::testing::random_prompts({6, 3, 5}, 96, 30);
  rollout::Engine engine(m, nullptr, {4, true});
  for (int round = 0; round < 2; ++round) {
    const std::vector<std::vector<std::vector<int32_t>>> calls{prompts, {prompts[0]}};
    for (const auto& asked : calls) {  // 6 rows: packed weights; one row: used in place
      auto samples = engine.generate(asked, asked.size() > 1 ? 2 : 1, sampled().max_new_tokens(10).seed(3));
      auto want = training_logprobs(*m, asked, samples);
      for (size_t i = 0; i < samples.size(); ++i)
        for (size_t t = 0; t < samples[i].tokens.size(); ++t)
          EXPECT_NEAR(samples[i].logprobs[t], want[i][t], kFp32) << "round " << round << " sample " << i;
    }
    randomise(6);  // what an optimizer step does to the factors
  }
}

// A stage's engine and an evaluation's on the same model use one packed copy.
TEST(RolloutEngine, EnginesOnOneModelShareItsPackedWeights) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto other = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  EXPECT_EQ(rollout::SlotProjections::shared_for(*m), rollout::SlotProjections::shared_for(*m));
  EXPECT_NE(rollout::SlotProjections::shared_for(*m), rollout::SlotProjections::shared_for(*other));
}

// Each prompt alone (prompt_offset = its index, so its samples draw from the
// same generators) against the same prompts together in several batchings.
void expect_batch_invariant(std::shared_ptr<model::DecoderModel> m, const std::vector<std::vector<int32_t>>& prompts,
                            const rollout::SamplingParams& params, double tol) {
  const int64_t n = 2;
  std::vector<rollout::Sample> alone;
  for (size_t p = 0; p < prompts.size(); ++p) {
    rollout::SamplingParams one = params;
    one.prompt_offset = int64_t(p);
    rollout::Engine engine(m, nullptr, {64, true});
    for (auto& s : engine.generate({prompts[p]}, n, one)) {
      s.prompt_index = int64_t(p);
      alone.push_back(s);
    }
  }
  struct Batching {
    int64_t max_batch;
    bool continuous;
  };
  for (Batching b : {Batching{4, true}, Batching{4, false}, Batching{64, true}, Batching{5, true}}) {
    rollout::Engine engine(m, nullptr, {b.max_batch, b.continuous});
    auto mixed = engine.generate(prompts, n, params);
    ASSERT_EQ(mixed.size(), alone.size());
    for (size_t i = 0; i < mixed.size(); ++i) {
      ASSERT_EQ(mixed[i].prompt_index, alone[i].prompt_index);
      ASSERT_EQ(mixed[i].sample_index, alone[i].sample_index);
      EXPECT_TRUE(same_generation(*m, prompts[mixed[i].prompt_index], alone[i], mixed[i], tol))
          << "max_batch " << b.max_batch << (b.continuous ? " continuous" : " static") << ", prompt "
          << mixed[i].prompt_index << " sample " << mixed[i].sample_index;
    }
  }
}

TEST(RolloutEngine, SampledOutputDoesNotDependOnTheBatch) {
  expect_batch_invariant(stories64(), story_prompts({4, 19, 9, 25, 1}, 17),
                         sampled().max_new_tokens(12).seed(11).eos({2}), kFloat64);
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  expect_batch_invariant(qwen, hpcrl::testing::random_prompts({3, 21, 8, 1, 12}, 96, 18),
                         sampled().max_new_tokens(16).seed(12).eos({7, 9}), kFp32);
}

TEST(RolloutEngine, GreedyOutputDoesNotDependOnTheBatch) {
  expect_batch_invariant(stories64(), story_prompts({4, 19, 9, 25, 1}, 17), greedy().max_new_tokens(12).eos({2}),
                         kFloat64);
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  expect_batch_invariant(qwen, hpcrl::testing::random_prompts({3, 21, 8, 1, 12}, 96, 18),
                         greedy().max_new_tokens(16).eos({7, 9}), kFp32);
}

TEST(RolloutEngine, ContinuousBatchingRefillsFreedSlots) {
  // Near-uniform logits (seeded preset) and 30 EOS ids: each step ends a sample
  // with probability ~0.11, so lengths are geometric — a long tail.
  auto m = model::load_model("preset:tiny", {});
  m->eval();
  rollout::SamplingParams p = sampled().max_new_tokens(40).seed(2);
  for (int32_t id = 0; id < 30; ++id) p.eos_ids.push_back(id);
  auto prompts = hpcrl::testing::random_prompts({5, 9, 3, 7, 6, 4, 8, 2}, 250, 6, 30);
  int64_t steps[2];
  std::vector<rollout::Sample> out[2];
  for (bool continuous : {false, true}) {
    rollout::Engine engine(m, nullptr, {4, continuous});
    out[continuous] = engine.generate(prompts, 3, p);
    steps[continuous] = engine.last_stats().decode_steps;
  }
  for (size_t i = 0; i < out[0].size(); ++i) EXPECT_EQ(out[0][i].tokens, out[1][i].tokens);
  // Static batching decodes until the longest of each wave of 4 is done;
  // refilling keeps the 4 slots busy.
  EXPECT_LT(double(steps[1]), 0.8 * double(steps[0])) << steps[1] << " vs " << steps[0];
}

TEST(RolloutEngine, SamplesOfAPromptShareOnePrefill) {
  auto m = hpcrl::testing::stories();
  auto prompts = story_prompts({10, 20, 5}, 3);
  rollout::Engine engine(m, nullptr, {64, true});
  auto out = engine.generate(prompts, 4, sampled().max_new_tokens(6).seed(1));
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(engine.last_stats().prompt_tokens, 35);  // each prompt once, not once per sample
  EXPECT_EQ(engine.last_stats().forward_calls - engine.last_stats().decode_steps, 1);
  // Different samples of one prompt draw different tokens.
  EXPECT_NE(out[0].tokens, out[1].tokens);
}

TEST(RolloutEngine, AGroupSplitOverAdmissionsIsStillPrefilledOnce) {
  // 3 slots for 3 prompts x 4 samples: each group is admitted in parts as
  // slots free up; its later samples copy the kept prompt prefix instead of
  // prefilling again, and draw what they draw with room for every sample.
  auto m = hpcrl::testing::stories();
  auto prompts = story_prompts({10, 20, 5}, 3);
  const rollout::SamplingParams p = sampled().max_new_tokens(6).seed(1);
  rollout::Engine roomy(m, nullptr, {64, true});
  auto want = roomy.generate(prompts, 4, p);
  for (bool continuous : {true, false}) {
    rollout::Engine narrow(m, nullptr, {3, continuous});
    auto got = narrow.generate(prompts, 4, p);
    EXPECT_EQ(narrow.last_stats().prompt_tokens, 35) << "continuous " << continuous;  // 10 + 20 + 5
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_generation(*m, prompts[got[i].prompt_index], want[i], got[i], kStoriesFp32))
          << "continuous " << continuous << ", prompt " << got[i].prompt_index << " sample " << got[i].sample_index;
  }
}

TEST(RolloutEngine, StopsAtTheFirstTokenWhoseTextCompletesAStopString) {
  auto tok = io::load_tokenizer("builtin");
  auto m = model::load_model("preset:tiny", {});
  m->eval();
  std::vector<std::vector<int32_t>> prompts = {tok->encode("Once upon a time", true)};
  rollout::Engine engine(m, tok.get(), {8, true});
  rollout::SamplingParams p = sampled().max_new_tokens(60).seed(9);
  auto free_run = engine.generate(prompts, 1, p)[0];
  ASSERT_EQ(free_run.finish_reason, "length");
  // The stop string: the first two printable ASCII characters in a row after the start.
  std::string text = tok->decode(free_run.tokens);
  size_t at = std::string::npos;
  for (size_t i = 2; i + 1 < text.size() && at == std::string::npos; ++i)
    if (text[i] > 32 && text[i] < 127 && text[i + 1] > 32 && text[i + 1] < 127) at = i;
  ASSERT_NE(at, std::string::npos) << text;
  const std::string stop = text.substr(at, 2);
  p.stop = {stop};
  auto stopped = engine.generate(prompts, 1, p)[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  ASSERT_LT(stopped.tokens.size(), free_run.tokens.size());
  EXPECT_EQ(std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + stopped.tokens.size()),
            stopped.tokens);
  EXPECT_NE(tok->decode(stopped.tokens).find(stop), std::string::npos);
  std::vector<int32_t> before(stopped.tokens.begin(), stopped.tokens.end() - 1);
  EXPECT_EQ(tok->decode(before).find(stop), std::string::npos) << "it should have stopped one token earlier";
}

TEST(RolloutEngine, EosEndsASampleAndIsKept) {
  auto m = hpcrl::testing::stories();
  auto prompts = story_prompts({5}, 40);
  rollout::Engine engine(m, nullptr, {8, true});
  auto free_run = engine.generate(prompts, 1, greedy().max_new_tokens(30))[0];
  const int32_t eos = free_run.tokens[6];
  auto stopped = engine.generate(prompts, 1, greedy().max_new_tokens(30).eos({eos}))[0];
  auto first = std::find(free_run.tokens.begin(), free_run.tokens.end(), eos) - free_run.tokens.begin();
  EXPECT_EQ(stopped.finish_reason, "stop");
  ASSERT_EQ(int64_t(stopped.tokens.size()), first + 1);
  EXPECT_EQ(stopped.tokens.back(), eos);
}

// Sampled outputs of one engine configuration, with its stats.
struct Generation {
  std::vector<rollout::Sample> samples;
  rollout::GenerateStats stats;
};
Generation generate_with(std::shared_ptr<model::DecoderModel> m, const io::Tokenizer* tok, rollout::EngineOptions options,
                  const std::vector<std::vector<int32_t>>& prompts, int64_t n, const rollout::SamplingParams& p) {
  rollout::Engine engine(m, tok, options);
  Generation r{engine.generate(prompts, n, p), {}};
  r.stats = engine.last_stats();
  return r;
}

rollout::EngineOptions engine_options(int64_t max_batch, int64_t host_sync_interval) {
  rollout::EngineOptions o;
  o.max_batch = max_batch;
  o.host_sync_interval = host_sync_interval;
  return o;
}

void expect_same_samples(model::DecoderModel& m, const std::vector<std::vector<int32_t>>& prompts, const Generation& want,
                         const Generation& got, const std::string& what) {
  ASSERT_EQ(got.samples.size(), want.samples.size()) << what;
  for (size_t i = 0; i < got.samples.size(); ++i)
    EXPECT_TRUE(same_generation(m, prompts[want.samples[i].prompt_index], want.samples[i], got.samples[i], kFp32))
        << what << ", sequence " << i;
}

TEST(RolloutEngine, SamplesAreTheSameAtMaxBatch1_3_8) {
  // The fp32 model on the CPU: packed weights, and (no top-p) the CPU row sampler.
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto prompts = hpcrl::testing::random_prompts({3, 21, 8, 1, 12}, 96, 18);
  rollout::SamplingParams p = sampled().max_new_tokens(16).seed(12).eos({7, 9});
  p.top_p = 1.0;
  const Generation one = generate_with(qwen, nullptr, engine_options(1, 1), prompts, 2, p);
  for (int64_t max_batch : {3, 8})
    expect_same_samples(*qwen, prompts, one, generate_with(qwen, nullptr, engine_options(max_batch, 1), prompts, 2, p),
                        "max_batch " + std::to_string(max_batch));
}

TEST(RolloutEngine, ReadingTheTokensEveryFewStepsGivesTheSameSamples) {
  // EOS is checked on the device every step; stop strings, retiring and
  // refilling wait for the host's read. 8 prompts x 3 samples in 4 slots, so
  // slots are refilled. Of the untrained model's 272 tokens, 16 are EOS ids
  // (5.9 %) and 4 are one-byte stop strings (1.5 %): were tokens uniform, a
  // sample would end at each step with 7.4 % chance, 4:1 by EOS, and
  // 0.926^12 = 40 % of samples would reach max_new_tokens = 12. Its
  // distribution is not uniform (seed 2 ends 8 samples by EOS, 10 by stop
  // string, 6 by length), but every way of ending keeps a share of several
  // samples out of 24. (With 30 EOS ids and 24 new tokens, 0.876^24 = 4 %:
  // no sample reached the length.)
  auto tok = io::load_tokenizer("builtin");
  auto m = model::load_model("preset:tiny", {});
  m->eval();
  rollout::SamplingParams p = sampled().max_new_tokens(12).seed(2);
  for (int32_t id = 0; id < 16; ++id) p.eos_ids.push_back(id);
  p.stop = {"a", "e", "o", "t"};
  auto prompts = hpcrl::testing::random_prompts({5, 9, 3, 7, 6, 4, 8, 2}, 250, 6, 30);
  const Generation every = generate_with(m, tok.get(), engine_options(4, 1), prompts, 3, p);
  int64_t by_eos = 0, by_stop_string = 0, by_length = 0;
  for (const auto& s : every.samples) {
    const bool eos = std::find(p.eos_ids.begin(), p.eos_ids.end(), s.tokens.back()) != p.eos_ids.end();
    by_eos += s.finish_reason == "stop" && eos;
    by_stop_string += s.finish_reason == "stop" && !eos;
    by_length += s.finish_reason == "length";
  }
  EXPECT_GT(by_eos, 0);
  EXPECT_GT(by_stop_string, 0);
  EXPECT_GT(by_length, 0);
  EXPECT_GE(every.stats.host_syncs, every.stats.decode_steps);  // a read after every step
  for (int64_t interval : {3, 8}) {
    const Generation few = generate_with(m, tok.get(), engine_options(4, interval), prompts, 3, p);
    expect_same_samples(*m, prompts, every, few, "host_sync_interval " + std::to_string(interval));
    EXPECT_EQ(few.stats.generated_tokens, every.stats.generated_tokens);
    EXPECT_LT(few.stats.host_syncs, every.stats.host_syncs) << "interval " << interval;
  }
}

TEST(RolloutEngine, ChunkedPrefillGivesTheSamplesOfOnePrefill) {
  // A budget of 3360 attention scores: 3 prompts x 4 heads x 40 keys leave
  // chunks of 7 positions, so the 40-token prompt takes ceil(40 / 7) = 6
  // forwards, each attending to the keys/values the earlier ones cached.
  auto qwen = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto prompts = hpcrl::testing::random_prompts({25, 40, 9}, 96, 21);
  const rollout::SamplingParams p = sampled().max_new_tokens(8).seed(5);
  const Generation whole = generate_with(qwen, nullptr, engine_options(8, 1), prompts, 2, p);
  rollout::EngineOptions small = engine_options(8, 1);
  small.prefill_attention_elements = 3360;
  const Generation chunked = generate_with(qwen, nullptr, small, prompts, 2, p);
  EXPECT_EQ(whole.stats.prefill_forwards, 1);
  EXPECT_EQ(chunked.stats.prefill_forwards, 6);
  EXPECT_EQ(chunked.stats.prompt_tokens, 74);  // 25 + 40 + 9: still each prompt once
  expect_same_samples(*qwen, prompts, whole, chunked, "chunked prefill");
}

using hpcrl::testing::input_error_of;

TEST(RolloutEngine, BadInputIsAnInputErrorSayingWhatToFix) {
  auto m = hpcrl::testing::stories();
  rollout::Engine engine(m, nullptr, {8, true});
  std::vector<int32_t> long_prompt(500, 5);
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 2}, long_prompt}, 1, greedy().max_new_tokens(20)); }),
            "prompt 1 has 500 tokens; with max_new_tokens 20 it exceeds the model's context of 512 tokens: "
            "shorten the prompt or lower max_new_tokens");
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 2}, {}}, 1, greedy().max_new_tokens(4)); }),
            "prompt 1 is empty; every prompt needs at least one token");
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 2}}, 0, greedy().max_new_tokens(4)); }),
            "n (samples per prompt) must be at least 1, got 0");
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 600}}, 1, greedy().max_new_tokens(4)); }),
            "prompt 0 token 1 is id 600, outside the model's vocabulary [0, 512): the prompt was tokenized for "
            "another model");
  rollout::SamplingParams p = sampled().max_new_tokens(4).seed(1);
  p.top_p = 0;
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 2}}, 1, p); }), "top_p must be in (0, 1] (1 = off), got 0");
  p = sampled().max_new_tokens(4).seed(1);
  p.stop = {"x"};
  EXPECT_EQ(input_error_of([&] { engine.generate({{1, 2}}, 1, p); }),
            "stop strings need a tokenizer to decode the response");
  EXPECT_EQ(input_error_of([&] { rollout::Engine(m, nullptr, {0, true}); }), "rollout max_batch must be at least 1, got 0");
  EXPECT_TRUE(engine.generate({}, 2, greedy().max_new_tokens(4)).empty());
}

TEST(RolloutEngine, OneNewTokenEndsEverySampleAtItsPrefill) {
  auto m = hpcrl::testing::stories();
  rollout::Engine engine(m, nullptr, {2, true});
  auto out = engine.generate(story_prompts({3, 8, 4}, 2), 2, sampled().max_new_tokens(1).seed(3));
  ASSERT_EQ(out.size(), 6u);
  for (const auto& s : out) {
    EXPECT_EQ(s.tokens.size(), 1u);
    EXPECT_EQ(s.finish_reason, "length");
  }
  EXPECT_EQ(engine.last_stats().decode_steps, 0);
}

}  // namespace
