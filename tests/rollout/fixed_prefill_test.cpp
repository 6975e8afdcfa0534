// The fixed-shape prefill (src/rollout/fixed_prefill.h) against
// SlotForward::prefill, the same computation shaped by the admission: the same
// keys/values in every sequence's slot and the same first-token logits within
// 1e-5 (fp32, docs/rollout.md), the first token chosen on the device logged
// once per row; its padding (prompts and sequences repeated to fill the
// buckets) changes no other slot or row; and an admission whose padded shape
// passes one prefill chunk is left to the chunked prefill. The engine-level
// comparisons (fixed against dynamic steps, prefill included) are in
// fixed_step_test.cpp.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <functional>
#include <memory>
#include <vector>

#ifdef HPCRL_TORCH_CUDA
#include <torch/cuda.h>
#endif

#include "hpcrl/rollout/dispatch_counter.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "hpcrl/rollout/slot_projections.h"
#include "rollout/device_rows.h"
#include "rollout/fixed_prefill.h"
#include "rollout/rollout_testing.h"

namespace {

using namespace hpcrl;
constexpr double kFp32 = 1e-5;  // docs/rollout.md
constexpr int64_t kSlots = 8, kUsable = 24;

struct Bench {
  std::shared_ptr<model::DecoderModel> m = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  // 3 prompts of 5, 9 and 3 tokens.
  std::vector<std::vector<int32_t>> prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 41);
  rollout::SamplingParams params;
  std::unique_ptr<rollout::SlotProjections> projections;
  std::unique_ptr<rollout::SlotForward> forward;
  Bench() {
    params.temperature = 0;
    params.max_new_tokens = 8;
    projections = std::make_unique<rollout::SlotProjections>(*m);
    projections->prepare(/*pack=*/true);
    forward = std::make_unique<rollout::SlotForward>(*m, int64_t(1) << 26, *projections);
  }
  std::vector<const std::vector<int32_t>*> distinct() const { return {&prompts[0], &prompts[1], &prompts[2]}; }
};

// Every slot's keys -1 and values -2 in every column, every length 0: what a prefill must leave alone shows.
rollout::KvSlots marked_slots(const model::DecoderModel& m) {
  rollout::KvSlots slots(m, kSlots, kUsable + 1);  // + the fixed step's scratch column
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < slots.layers(); ++l) {
    slots.k(l).fill_(-1.0);
    slots.v(l).fill_(-2.0);
  }
  return slots;
}

// An admission's buffers: marked slots, rows without a draw table (greedy), the fixed prefill on `launcher`.
struct Buffers {
  Buffers(const Bench& b, rollout::SlotForward& forward, rollout::StepLauncher& launcher)
      : slots(marked_slots(*b.m)),
        rows(kSlots, 1, b.params, at::kCPU, false),
        prefill({forward, slots, rows, b.params, launcher}) {}
  rollout::KvSlots slots;
  rollout::DeviceRows rows;
  rollout::FixedPrefill prefill;
};

// Starts rows [first, first + lengths.size()) at the given lengths, as GenerationRun::start_rows does.
void start_rows(rollout::DeviceRows& rows, int64_t first, const std::vector<int64_t>& lengths) {
  std::vector<rollout::DrawKey> keys;
  for (size_t i = 0; i < lengths.size(); ++i) keys.push_back({int64_t(i), 0, 0});
  rows.start(first, lengths, std::vector<int64_t>(lengths.size(), 0), keys);
}

TEST(FixedPrefill, EqualsTheChunkedPrefillInEverySlotAndItsLogits) {
  // 3 prompts for 5 sequences (prompt_of 0 1 2 0 1) from slot 2: buckets of 4 prompts, 8 sequences, 16 positions.
  Bench b;
  const std::vector<int64_t> prompt_of = {0, 1, 2, 0, 1}, lengths = {5, 9, 3, 5, 9};
  rollout::KvSlots chunked = marked_slots(*b.m);
  const at::Tensor want = b.forward->prefill(chunked, 2, b.distinct(), prompt_of, 4);  // chunks of 4 positions
  const auto eager = rollout::eager_step_launcher();
  Buffers x(b, *b.forward, *eager);
  rollout::KvSlots& fixed = x.slots;
  ASSERT_TRUE(x.prefill.fits(3, 9, 5));
  start_rows(x.rows, 2, lengths);
  const at::Tensor got = x.prefill.prefill(2, b.distinct(), prompt_of);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got, want, 0, kFp32)) << (got - want).abs().max();
  for (int64_t f = 0; f < 5; ++f)
    for (int64_t l = 0; l < fixed.layers(); ++l) {
      const int64_t s = 2 + f, n = lengths[size_t(f)];
      EXPECT_TRUE(at::allclose(fixed.k(l)[s].narrow(1, 0, n), chunked.k(l)[s].narrow(1, 0, n), 0, kFp32)) << s;
      EXPECT_TRUE(at::allclose(fixed.v(l)[s].narrow(1, 0, n), chunked.v(l)[s].narrow(1, 0, n), 0, kFp32)) << s;
    }
}

TEST(FixedPrefill, ChoosesEachRowsFirstTokenOnceOnTheDevice) {
  // Sequences 5-7 of the 8-row bucket repeat sequence 0 (row 2): row 2 must log one token, not four.
  Bench b;
  const std::vector<int64_t> prompt_of = {0, 1, 2, 0, 1}, lengths = {5, 9, 3, 5, 9};
  const auto eager = rollout::eager_step_launcher();
  Buffers x(b, *b.forward, *eager);
  rollout::DeviceRows& rows = x.rows;
  start_rows(rows, 2, lengths);
  const at::Tensor logits = x.prefill.prefill(2, b.distinct(), prompt_of);
  const auto want = rollout::choose_tokens(logits, {0.0, 0, 1.0, 0.0}, {}, false);  // greedy, on the host
  const auto log = rows.take_log(kSlots);
  for (int64_t f = 0; f < 5; ++f) {
    ASSERT_EQ(log.count[2 + f].item<int64_t>(), 1) << "row " << 2 + f;
    EXPECT_EQ(log.ids[2 + f][0].item<int64_t>(), want.ids[f].item<int64_t>()) << "row " << 2 + f;
    EXPECT_NEAR(log.logprobs[2 + f][0].item<float>(), want.logprobs[f].item<float>(), kFp32) << "row " << 2 + f;
    EXPECT_EQ(rows.last_tokens(kSlots)[2 + f].item<int64_t>(), want.ids[f].item<int64_t>()) << "row " << 2 + f;
  }
}

TEST(FixedPrefill, ItsPaddingChangesNoOtherSlotOrRow) {
  // Slots 0-1 and 7 are outside the admission (2-6): their keys, values and rows stay as they were.
  Bench b;
  const std::vector<int64_t> prompt_of = {0, 1, 2, 0, 1}, lengths = {5, 9, 3, 5, 9};
  const auto eager = rollout::eager_step_launcher();
  Buffers x(b, *b.forward, *eager);
  rollout::KvSlots& slots = x.slots;
  rollout::DeviceRows& rows = x.rows;
  start_rows(rows, 0, {11, 12, 0, 0, 0, 0, 0, 13});
  start_rows(rows, 2, lengths);
  x.prefill.prefill(2, b.distinct(), prompt_of);
  for (int64_t s : {0, 1, 7})
    for (int64_t l = 0; l < slots.layers(); ++l) {
      EXPECT_TRUE(slots.k(l)[s].eq(-1.0).all().item<bool>()) << "slot " << s << " layer " << l;
      EXPECT_TRUE(slots.v(l)[s].eq(-2.0).all().item<bool>()) << "slot " << s << " layer " << l;
    }
  const auto log = rows.take_log(kSlots);
  for (int64_t r : {0, 1, 7}) EXPECT_EQ(log.count[r].item<int64_t>(), 0) << "row " << r;
  EXPECT_TRUE(rows.positions(kSlots).equal(at::tensor(std::vector<int64_t>{11, 12, 5, 9, 3, 5, 9, 13})));
}

TEST(FixedPrefill, AShapePastOneChunkIsLeftToTheChunkedPrefill) {
  // An attention budget of 4 x 4 x 16 x 16 = 4,096 scores: 3 prompts of up to 16 positions (bucket 4 x 16) fit
  // one chunk; 5 prompts (bucket 8) do not, nor a 17-token prompt (bucket 24, the usable columns).
  Bench b;
  rollout::SlotForward small(*b.m, 4 * 4 * 16 * 16, *b.projections);
  const auto eager = rollout::eager_step_launcher();
  Buffers x(b, small, *eager);
  EXPECT_TRUE(x.prefill.fits(3, 16, 8));
  EXPECT_FALSE(x.prefill.fits(5, 16, 8));
  EXPECT_FALSE(x.prefill.fits(3, 17, 8));
}

// Runs each step eagerly and counts the operator calls inside it: what a graph would hold.
class CountingLauncher final : public rollout::StepLauncher {
 public:
  void launch(rollout::StepShape, const std::function<void()>& step) override {
    const rollout::DispatchTally tally(inside);
    step();
  }
  int64_t inside = 0;
};

TEST(FixedPrefill, LeavesSevenOperatorCallsOutsideWhatAGraphHolds) {
  // Outside the launch: the host ids and inputs made (2 zeros), the ids' buffer narrowed twice and copied into
  // (3), the inputs copied (1), the logits narrowed to the F sequences (1) = 7; under graphs, the rest is one replay.
  Bench b;
  CountingLauncher launcher;
  Buffers x(b, *b.forward, launcher);
  start_rows(x.rows, 2, {5, 9, 3, 5, 9});
  const rollout::DispatchCounter counter;
  x.prefill.prefill(2, b.distinct(), {0, 1, 2, 0, 1});
  EXPECT_EQ(counter.count() - launcher.inside, 7);
  EXPECT_GT(launcher.inside, 100);  // the forward of 3 layers, the choice and the rows' update
}

#ifdef HPCRL_TORCH_CUDA
// Where a GPU is (scripts/gpu-check.sh, step test-gpu-decode): three admissions of one shape — the
// warm-up, the capture, a replay — each with other prompts, each equal to the chunked prefill's logits.
TEST(GpuDecode, PrefillGraphsReplayEachAdmissionsOwnPrompts) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Bench b;
  b.m->to(at::Device(at::kCUDA, 0));
  b.projections = std::make_unique<rollout::SlotProjections>(*b.m);
  b.projections->prepare(/*pack=*/true);
  b.forward = std::make_unique<rollout::SlotForward>(*b.m, int64_t(1) << 26, *b.projections);
  rollout::KvSlots slots(*b.m, kSlots, kUsable + 1), chunked(*b.m, kSlots, kUsable + 1);
  rollout::DeviceRows rows(kSlots, 1, b.params, at::Device(at::kCUDA, 0), false);
  const auto graphs = rollout::graph_step_launcher(at::Device(at::kCUDA, 0));
  rollout::FixedPrefill prefill({*b.forward, slots, rows, b.params, *graphs});
  const std::vector<int64_t> prompt_of = {0, 1, 2, 0, 1};
  for (uint64_t round = 0; round < 3; ++round) {
    // 3 prompts of 5, 9 and 3 tokens each round (buckets 4 x 16 positions, 8 sequences), other ids each time.
    const auto prompts = hpcrl::testing::random_prompts({5, 9, 3}, 96, 100 + round);
    const std::vector<const std::vector<int32_t>*> distinct = {&prompts[0], &prompts[1], &prompts[2]};
    rows.reset(0);
    start_rows(rows, 1, {5, 9, 3, 5, 9});
    const at::Tensor got = prefill.prefill(1, distinct, prompt_of).cpu();
    const at::Tensor want = b.forward->prefill(chunked, 1, distinct, prompt_of, 16).cpu();
    EXPECT_TRUE(at::allclose(got, want, 0, kFp32)) << "round " << round << ": " << (got - want).abs().max();
  }
  EXPECT_EQ(graphs->captures(), 1);  // round 1 captures (round 0 warms up)
  EXPECT_EQ(graphs->replays(), 2);   // rounds 1 and 2
}
#endif

}  // namespace
