// The fixed-shape decode step (src/rollout/fixed_decode_step.h, engine.h's
// DecodeStep::fixed) against the engine's dynamic step, the same computation
// shaped by the live rows: the same tokens (near-ties excepted, docs/rollout.md)
// and log-probs within 1e-5 for greedy and sampled decoding with every filter,
// EOS, stop strings, refills, shared prefill, host reads every few steps,
// paused samples and multi-turn rows; the device choice against the host's;
// the draw table against the host's draws; and a padded row, which must change
// nothing any row keeps. Only the graph launcher is CUDA-only (GpuDecode tests
// at the end run where a GPU is).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#ifdef HPCRL_TORCH_CUDA
#include <torch/cuda.h>
#endif

#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/philox.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "hpcrl/rollout/slot_projections.h"
#include "rollout/device_rows.h"
#include "rollout/fixed_decode_step.h"
#include "rollout/rollout_testing.h"
#include "rollout/scripted_turns.h"

namespace {

using namespace hpcrl;
using hpcrl::testing::same_generation;
using rollout::DecodeStep;
constexpr double kFp32 = 1e-5;  // docs/rollout.md

rollout::EngineOptions options(int64_t slots, DecodeStep step, int64_t host_sync_interval = 1) {
  rollout::EngineOptions o;
  o.max_batch = slots;
  o.decode_step = step;
  o.host_sync_interval = host_sync_interval;
  return o;
}

rollout::SamplingParams greedy(int64_t max_new_tokens, std::vector<int32_t> eos = {}) {
  rollout::SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new_tokens;
  p.eos_ids = std::move(eos);
  return p;
}

// Temperature 0.8 with top-k 40, top-p 0.9 and min-p 0.02 together, tempered log-probs.
rollout::SamplingParams filtered(int64_t max_new_tokens, uint64_t seed) {
  rollout::SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 40;
  p.top_p = 0.9;
  p.min_p = 0.02;
  p.logprobs_at_temperature = true;
  p.max_new_tokens = max_new_tokens;
  p.seed = seed;
  p.eos_ids = {5, 11, 17};
  return p;
}

struct Decoded {
  std::vector<rollout::Sample> samples;
  rollout::GenerateStats stats;
};

Decoded generate(const std::shared_ptr<model::DecoderModel>& m, const io::Tokenizer* tok, const rollout::EngineOptions& o,
             const std::vector<std::vector<int32_t>>& prompts, int64_t n, const rollout::SamplingParams& p) {
  rollout::Engine engine(m, tok, o);
  Decoded r{engine.generate(prompts, n, p), {}};
  r.stats = engine.last_stats();
  return r;
}

void expect_same(model::DecoderModel& m, const std::vector<std::vector<int32_t>>& prompts, const Decoded& want,
                 const Decoded& got) {
  ASSERT_EQ(got.samples.size(), want.samples.size());
  for (size_t i = 0; i < got.samples.size(); ++i)
    EXPECT_TRUE(same_generation(m, prompts[size_t(want.samples[i].prompt_index)], want.samples[i], got.samples[i],
                                kFp32))
        << "sequence " << i;
}

TEST(FixedDecodeStep, RowBucketsArePowersOfTwoBelowTheSlotCountThenTheSlotCount) {
  EXPECT_EQ(rollout::StepBuckets::rows(1, 64), 1);
  EXPECT_EQ(rollout::StepBuckets::rows(3, 64), 4);
  EXPECT_EQ(rollout::StepBuckets::rows(33, 64), 64);
  EXPECT_EQ(rollout::StepBuckets::rows(33, 48), 48);  // 64 > 48 slots: the slot count
  EXPECT_EQ(rollout::StepBuckets::rows(5, 5), 5);
}

TEST(FixedDecodeStep, KeyBucketsStartAt16AndDoubleUpToTheCapacity) {
  EXPECT_EQ(rollout::StepBuckets::keys(1, 64), 16);
  EXPECT_EQ(rollout::StepBuckets::keys(17, 64), 32);
  EXPECT_EQ(rollout::StepBuckets::keys(40, 50), 50);  // 64 > 50 columns: the capacity
  EXPECT_EQ(rollout::StepBuckets::keys(3, 10), 10);
}

TEST(FixedDecodeStep, TheDeviceChoiceIsTheHostChoiceUnderEveryFilter) {
  // 6 rows over 300 ids, logits spread like a trained model's (σ = 3), the same uniforms.
  torch::manual_seed(4);
  const at::Tensor logits = 3.0 * at::randn({6, 300});
  const at::Tensor u = rollout::draw_uniforms(9, {{0, 0, 0}, {0, 1, 0}, {1, 0, 3}, {2, 0, 1}, {3, 2, 7}, {4, 0, 0}});
  const std::vector<rollout::TokenFilter> filters = {
      {0.0, 0, 1.0, 0.0}, {1.0, 0, 1.0, 0.0}, {0.7, 0, 1.0, 0.0}, {1.0, 20, 1.0, 0.0},
      {1.0, 0, 0.9, 0.0}, {1.0, 0, 1.0, 0.05}, {0.8, 40, 0.9, 0.02}};
  for (const auto& f : filters)
    for (bool tempered : {false, true}) {
      const auto host = rollout::choose_tokens(logits, f, u, tempered);
      const auto device = rollout::choose_tokens_on_device(logits, f, u, tempered);
      const std::string what = "T " + std::to_string(f.temperature) + " k " + std::to_string(f.top_k) + " p " +
                               std::to_string(f.top_p) + " min_p " + std::to_string(f.min_p);
      EXPECT_TRUE(at::equal(host.ids, device.ids)) << what;
      EXPECT_TRUE(at::allclose(host.logprobs, device.logprobs, 0, 1e-6)) << what;
    }
}

TEST(FixedDecodeStep, TheDrawTableHoldsTheDrawsTheHostMakes) {
  // Row 0 is sample 2 of prompt 5 at its 3rd draw, row 1 sample 0 of prompt 2^33 + 1 (the key's high word) at 0.
  rollout::SamplingParams p;
  p.max_new_tokens = 6;
  p.seed = 77;
  rollout::DeviceRows rows(2, 1, p, at::kCPU, /*draw_table=*/true);
  const int64_t big = (int64_t(1) << 33) + 1;
  rows.start(0, {4, 4}, {3, 0}, {{5, 2, 3}, {big, 0, 0}});
  at::Tensor u = rows.next_uniforms(2);
  EXPECT_EQ(u[0].item<double>(), rollout::draw_uniform(77, 5, 2, 3));
  EXPECT_EQ(u[1].item<double>(), rollout::draw_uniform(77, big, 0, 0));
  // A token taken by each row moves both to their next draw.
  rows.append(0, at::tensor({int64_t(8), int64_t(9)}), at::zeros({2}));
  u = rows.next_uniforms(2);
  EXPECT_EQ(u[0].item<double>(), rollout::draw_uniform(77, 5, 2, 4));
  EXPECT_EQ(u[1].item<double>(), rollout::draw_uniform(77, big, 0, 1));
}

TEST(FixedDecodeStep, GreedySamplesEqualTheDynamicSteps) {
  // 5 prompts x 2 samples in 5 slots: shared prefill, refills, and live counts
  // of 3 (bucket 4) and 5 (bucket 5), so padded rows take part; EOS ends some.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({3, 21, 8, 1, 12}, 96, 18);
  const auto p = greedy(16, {7, 9});
  const Decoded dynamic = generate(m, nullptr, options(5, DecodeStep::dynamic), prompts, 2, p);
  const Decoded fixed = generate(m, nullptr, options(5, DecodeStep::fixed), prompts, 2, p);
  expect_same(*m, prompts, dynamic, fixed);
  EXPECT_EQ(fixed.stats.decode_steps, dynamic.stats.decode_steps);
  EXPECT_EQ(fixed.stats.graph_captures, 0);  // eager: no graph
  EXPECT_GE(fixed.stats.fixed_prefills, 2);  // the first admission and the refills: the fixed prefill's
  EXPECT_EQ(dynamic.stats.fixed_prefills, 0);
}

TEST(FixedDecodeStep, AnAdmissionPastOnePrefillChunkIsPrefilledInChunksAsInTheDynamicSteps) {
  // 2 slots: each admission is one prompt's 2 samples. A 21-token prompt pads to 32 positions; a budget of
  // 4 heads x 21 x 21 scores holds its unpadded prefill in one chunk (21 positions) but the padded shape only in
  // chunks of 4 x 21 x 21 / (4 x 32) = 13: every admission takes the chunked prefill.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({21, 18}, 96, 19);
  const auto p = greedy(6);
  rollout::EngineOptions o = options(2, DecodeStep::fixed);
  o.prefill_attention_elements = 4 * 21 * 21;
  const Decoded fixed = generate(m, nullptr, o, prompts, 2, p);
  o.decode_step = DecodeStep::dynamic;
  const Decoded dynamic = generate(m, nullptr, o, prompts, 2, p);
  expect_same(*m, prompts, dynamic, fixed);
  EXPECT_EQ(fixed.stats.fixed_prefills, 0);
  EXPECT_GT(fixed.stats.prefill_forwards, 0);
}

TEST(FixedDecodeStep, SampledSamplesEqualTheDynamicStepsUnderEveryFilter) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({6, 2, 14, 9}, 96, 23);
  const auto p = filtered(20, 31);
  const Decoded dynamic = generate(m, nullptr, options(3, DecodeStep::dynamic), prompts, 3, p);
  const Decoded fixed = generate(m, nullptr, options(3, DecodeStep::fixed), prompts, 3, p);
  expect_same(*m, prompts, dynamic, fixed);
}

TEST(FixedDecodeStep, EosStopStringsAndLengthEndSamplesAsInTheDynamicSteps) {
  // engine_test's ReadingTheTokensEveryFewStepsGivesTheSameSamples setting: 8
  // prompts x 3 samples in 4 slots, 16 EOS ids and 4 one-byte stop strings,
  // the host reading every 3 steps; samples end all three ways.
  auto tok = io::load_tokenizer("builtin");
  auto m = model::load_model("preset:tiny", {});
  m->eval();
  rollout::SamplingParams p;
  p.max_new_tokens = 12;
  p.top_p = 0.95;
  p.seed = 2;
  for (int32_t id = 0; id < 16; ++id) p.eos_ids.push_back(id);
  p.stop = {"a", "e", "o", "t"};
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3, 7, 6, 4, 8, 2}, 250, 6, 30);
  const Decoded dynamic = generate(m, tok.get(), options(4, DecodeStep::dynamic, 3), prompts, 3, p);
  const Decoded fixed = generate(m, tok.get(), options(4, DecodeStep::fixed, 3), prompts, 3, p);
  expect_same(*m, prompts, dynamic, fixed);
  std::set<std::string> endings;
  for (const auto& s : fixed.samples) endings.insert(s.finish_reason);
  EXPECT_EQ(endings, (std::set<std::string>{"length", "stop"}));
}

TEST(FixedDecodeStep, APaddedRowChangesNothingARowKeeps) {
  // 4 slots: rows 0-2 decode, row 3 holds a parked multi-turn row's cache and
  // device state that looks live (not ended, position at its length). One
  // step of 3 live rows runs in the 4-row bucket. Row 3's cache columns and
  // host length stay as they were, it logs no token, and rows 0-2 take the
  // tokens and log-probs of a dynamic step over those 3 rows alone.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  torch::NoGradGuard no_grad;
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3, 7}, 96, 61);
  const rollout::SamplingParams p = greedy(8);
  const int64_t capacity = 9 + 8;
  rollout::SlotProjections projections(*m);
  projections.prepare(/*pack=*/true);
  rollout::SlotForward forward(*m, int64_t(1) << 26, projections);
  const rollout::TokenFilter argmax{0.0, 0, 1.0, 0.0};
  // Prefills prompts[0, count) into `slots` and starts `rows` on each one's first token.
  auto start = [&](rollout::KvSlots& slots, rollout::DeviceRows& rows, int64_t count) {
    std::vector<const std::vector<int32_t>*> ps;
    std::vector<int64_t> of, lengths, zeros(size_t(count), 0);
    std::vector<rollout::DrawKey> keys;
    for (int64_t i = 0; i < count; ++i) {
      ps.push_back(&prompts[size_t(i)]);
      of.push_back(i);
      lengths.push_back(int64_t(prompts[size_t(i)].size()));
      keys.push_back({i, 0, 0});
    }
    const at::Tensor logits = forward.prefill(slots, 0, ps, of, 9);
    rows.start(0, lengths, zeros, keys);
    const auto first = rollout::choose_tokens(logits, argmax, {}, false);
    rows.append(0, first.ids, first.logprobs);
    rows.take_log(count);
  };
  rollout::KvSlots slots(*m, 4, capacity + 1);  // + the scratch column
  rollout::DeviceRows rows(4, 1, p, at::kCPU, false);
  start(slots, rows, 4);
  std::vector<at::Tensor> parked_k, parked_v;
  for (int64_t l = 0; l < slots.layers(); ++l) {
    parked_k.push_back(slots.k(l)[3].narrow(1, 0, capacity).clone());
    parked_v.push_back(slots.v(l)[3].narrow(1, 0, capacity).clone());
  }
  const auto eager = rollout::eager_step_launcher();
  rollout::FixedDecodeStep step({forward, slots, rows, p, *eager});
  step.step(3);
  const auto log = rows.take_log(4);

  rollout::KvSlots alone_slots(*m, 3, capacity);
  rollout::DeviceRows alone(3, 1, p, at::kCPU, false);
  start(alone_slots, alone, 3);
  const at::Tensor logits = forward.decode(alone_slots, 3, alone.last_tokens(3), alone.positions(3));
  const auto want = rollout::choose_tokens(logits, argmax, {}, false);

  for (int64_t r = 0; r < 3; ++r) {
    ASSERT_EQ(log.count[r].item<int64_t>(), 1) << "row " << r;
    EXPECT_EQ(log.ids[r][0].item<int64_t>(), want.ids[r].item<int64_t>()) << "row " << r;
    EXPECT_NEAR(log.logprobs[r][0].item<float>(), want.logprobs[r].item<float>(), kFp32) << "row " << r;
    EXPECT_EQ(slots.length(r), alone_slots.length(r)) << "row " << r;
  }
  EXPECT_EQ(log.count[3].item<int64_t>(), 0) << "the padded row logged a token";
  EXPECT_EQ(slots.length(3), 7) << "the padded row's host length moved";
  for (int64_t l = 0; l < slots.layers(); ++l) {
    EXPECT_TRUE(at::equal(slots.k(l)[3].narrow(1, 0, capacity), parked_k[size_t(l)])) << "layer " << l << " keys";
    EXPECT_TRUE(at::equal(slots.v(l)[3].narrow(1, 0, capacity), parked_v[size_t(l)])) << "layer " << l << " values";
  }
}

TEST(FixedDecodeStep, PausedSamplesContinueAsInTheDynamicSteps) {
  // 3 prompts x 2 samples in 3 slots pause once a prompt is done; the paused
  // rows continue in a second call (their draw tables start at their next
  // draw). Both calls under each step: the same samples.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  const auto p = filtered(16, 7);
  auto two_calls = [&](DecodeStep step) {
    rollout::Engine engine(m, nullptr, options(3, step));
    rollout::GenerationCall call = rollout::GenerationCall::fresh(3, 2);
    call.pause_after_groups = 1;
    rollout::GenerationResult first = engine.run(prompts, call, p);
    EXPECT_TRUE(engine.last_stats().paused);
    rollout::GenerationCall rest;
    rest.samples = first.paused;
    Decoded r{first.finished, {}};
    for (auto& s : engine.run(prompts, rest, p).finished) r.samples.push_back(std::move(s));
    std::sort(r.samples.begin(), r.samples.end(), [](const rollout::Sample& a, const rollout::Sample& b) {
      return a.prompt_index != b.prompt_index ? a.prompt_index < b.prompt_index : a.sample_index < b.sample_index;
    });
    return r;
  };
  const Decoded dynamic = two_calls(DecodeStep::dynamic);
  ASSERT_EQ(dynamic.samples.size(), 6u);
  expect_same(*m, prompts, dynamic, two_calls(DecodeStep::fixed));
}

TEST(FixedDecodeStep, MultiTurnRowsParkAndResumeAsInTheDynamicSteps) {
  // Rows that end a turn park in the top slots — inside the padded range of a
  // smaller live count — while the others decode; replies come 2 polls late.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({4, 7, 2, 6}, 96, 17);
  rollout::SamplingParams p;
  p.max_new_tokens = 32;
  p.seed = 3;
  auto turns = [&](DecodeStep step) {
    hpcrl::testing::ScriptedTurns handler(2);
    rollout::Engine engine(m, nullptr, options(5, step));
    return engine.run(prompts, rollout::GenerationCall::fresh(4, 2, &handler), p).finished;
  };
  const auto dynamic = turns(DecodeStep::dynamic), fixed = turns(DecodeStep::fixed);
  ASSERT_EQ(fixed.size(), dynamic.size());
  int64_t calls = 0;
  for (size_t k = 0; k < dynamic.size(); ++k) {
    EXPECT_TRUE(hpcrl::testing::same_trajectory(dynamic[k], fixed[k], kFp32)) << "sequence " << k;
    calls += dynamic[k].turns;
  }
  EXPECT_GT(calls, 2);
}

TEST(FixedDecodeStep, GraphsOnACpuModelRunTheFixedStepEagerly) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({4, 10}, 96, 5);
  const auto p = filtered(10, 2);
  const Decoded fixed = generate(m, nullptr, options(4, DecodeStep::fixed), prompts, 2, p);
  const Decoded graphs = generate(m, nullptr, options(4, DecodeStep::graphs), prompts, 2, p);
  expect_same(*m, prompts, fixed, graphs);
  EXPECT_EQ(graphs.stats.graph_captures, 0);
}

TEST(FixedDecodeStep, AKeptWorkspaceGivesTheSamplesOfAFreshEngine) {
  // decode_step: graphs keeps the call's buffers for the next call of the same
  // layout (on the CPU the step runs eagerly, so this checks the buffers'
  // reset, not a graph). Two calls of other prompts and seeds on one engine:
  // the second reuses the first's buffers and equals a fresh engine's call.
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto first = hpcrl::testing::random_prompts({9, 3, 12}, 96, 71);
  const auto second = hpcrl::testing::random_prompts({4, 11, 6}, 96, 72);
  rollout::Engine engine(m, nullptr, options(4, DecodeStep::graphs));
  engine.generate(first, 2, filtered(16, 1));
  EXPECT_FALSE(engine.last_stats().reused_buffers);
  const Decoded kept{engine.generate(second, 2, filtered(16, 2)), engine.last_stats()};
  EXPECT_TRUE(kept.stats.reused_buffers);
  expect_same(*m, second, generate(m, nullptr, options(4, DecodeStep::fixed), second, 2, filtered(16, 2)), kept);
}

TEST(FixedDecodeStep, AWorkspaceIsKeptOnlyWhileTheWeightsStayWhereTheyWereAndTheLayoutHolds) {
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  const auto prompts = hpcrl::testing::random_prompts({5, 8}, 96, 73);
  rollout::Engine engine(m, nullptr, options(4, DecodeStep::graphs));
  auto reused = [&](int64_t max_new_tokens) {
    engine.generate(prompts, 2, filtered(max_new_tokens, 3));
    return engine.last_stats().reused_buffers;
  };
  EXPECT_FALSE(reused(12));
  torch::NoGradGuard no_grad;
  for (auto& w : m->parameters()) w.mul_(1.01);  // in place, as an optimizer step
  EXPECT_TRUE(reused(12));
  for (auto& w : m->parameters()) w.set_data(w.clone());  // the same values in new storage
  EXPECT_FALSE(reused(12));
  EXPECT_TRUE(reused(12));
  EXPECT_FALSE(reused(13));  // another max_new_tokens: another layout
}

TEST(FixedDecodeStep, TheGraphLauncherOnTheCpuIsAnInputErrorNamingTheEagerSteps) {
  const std::string message =
      hpcrl::testing::input_error_of([] { rollout::graph_step_launcher(at::Device(at::kCPU)); });
  EXPECT_NE(message.find("decode_step: fixed or dynamic"), std::string::npos) << message;
}

#ifdef HPCRL_TORCH_CUDA
// Where a GPU is (scripts/gpu-check.sh runs these): graphs replay what the eager fixed step computes.
TEST(GpuDecode, GraphReplaysEqualTheEagerFixedStepOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto reference = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());  // on the CPU, judges near-ties
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  m->to(at::Device(at::kCUDA, 0));
  const auto prompts = hpcrl::testing::random_prompts({3, 21, 8, 1, 12, 5, 9}, 96, 18);
  const auto p = filtered(24, 13);
  const Decoded fixed = generate(m, nullptr, options(6, DecodeStep::fixed, 8), prompts, 3, p);
  const Decoded graphs = generate(m, nullptr, options(6, DecodeStep::graphs, 8), prompts, 3, p);
  expect_same(*reference, prompts, fixed, graphs);
  EXPECT_GT(graphs.stats.graph_captures, 0);
  EXPECT_GT(graphs.stats.graph_replays, graphs.stats.graph_captures);
}

TEST(GpuDecode, TheGpuChoiceOfEqualLogitsIsTheCpuChoice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  const at::Tensor logits = 3.0 * at::randn({6, 300});
  const at::Tensor u = rollout::draw_uniforms(9, {{0, 0, 0}, {0, 1, 0}, {1, 0, 3}, {2, 0, 1}, {3, 2, 7}, {4, 0, 0}});
  const rollout::TokenFilter f{0.8, 40, 0.9, 0.02};
  const auto cpu = rollout::choose_tokens(logits, f, u, true);
  const auto gpu = rollout::choose_tokens_on_device(logits.to(at::kCUDA), f, u.to(at::kCUDA), true);
  EXPECT_TRUE(at::equal(cpu.ids, gpu.ids.cpu()));
  EXPECT_TRUE(at::allclose(cpu.logprobs, gpu.logprobs.cpu(), 0, 1e-6));
}

TEST(GpuDecode, AGenerationAfterAWeightChangeReadsTheNewWeights) {
  // The weights change in place (×1.05, as an optimizer step would) between two calls of one
  // engine: the second call's graphs compute with the new weights, as a fresh engine's eager steps do.
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto reference = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  m->to(at::Device(at::kCUDA, 0));
  const auto prompts = hpcrl::testing::random_prompts({5, 11, 7}, 96, 29);
  const auto p = greedy(20);
  rollout::Engine engine(m, nullptr, options(4, DecodeStep::graphs, 8));
  engine.generate(prompts, 2, p);
  {
    torch::NoGradGuard no_grad;
    for (auto& w : m->parameters()) w.mul_(1.05);
    for (auto& w : reference->parameters()) w.mul_(1.05);
  }
  const Decoded graphs{engine.generate(prompts, 2, p), engine.last_stats()};
  const Decoded eager = generate(m, nullptr, options(4, DecodeStep::dynamic, 8), prompts, 2, p);
  expect_same(*reference, prompts, eager, graphs);
  EXPECT_TRUE(graphs.stats.reused_buffers) << "the weights changed in place: the first call's graphs replay";
  EXPECT_GT(graphs.stats.graph_replays, 0);
}

TEST(GpuDecode, TheGpuDrawsTheSamplesTheCpuDraws) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto cpu = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto gpu = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  gpu->to(at::Device(at::kCUDA, 0));
  const auto prompts = hpcrl::testing::random_prompts({6, 2, 14, 9}, 96, 23);
  const auto p = filtered(20, 31);
  const Decoded on_cpu = generate(cpu, nullptr, options(4, DecodeStep::dynamic), prompts, 3, p);
  const Decoded on_gpu = generate(gpu, nullptr, options(4, DecodeStep::graphs), prompts, 3, p);
  expect_same(*cpu, prompts, on_cpu, on_gpu);
}
#endif

}  // namespace
