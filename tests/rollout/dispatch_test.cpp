// The host's dispatch work in the engine (issue: on a GPU a small model's
// rollout is bound by the operator calls the host makes, each a few µs
// whatever its size): the operator-call counter itself; moves of many slots
// and rows in one gather and scatter, equal to the moves made one by one; and
// a prefill (and a reply prefill) whose calls do not grow with the prompts,
// their samples or the rows.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <memory>
#include <vector>

#include "hpcrl/rollout/dispatch_counter.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/slot_forward.h"
#include "hpcrl/rollout/slot_projections.h"
#include "hpcrl/util/error.h"
#include "rollout/device_rows.h"
#include "rollout/rollout_testing.h"

namespace {

using namespace hpcrl;

// Six slots of 8 columns; slot s holds s + 1 tokens whose keys are s + 1 and values -(s + 1).
rollout::KvSlots numbered_slots(const model::DecoderModel& m) {
  rollout::KvSlots slots(m, 6, 8);
  torch::NoGradGuard no_grad;
  for (int64_t s = 0; s < 6; ++s) {
    for (int64_t l = 0; l < slots.layers(); ++l) {
      slots.k(l)[s].narrow(1, 0, s + 1).fill_(double(s + 1));
      slots.v(l)[s].narrow(1, 0, s + 1).fill_(-double(s + 1));
    }
    slots.set_length(s, s + 1);
  }
  return slots;
}

// Slot `s` holds `length` tokens whose keys are `value` and values -`value`, in every layer.
void expect_slot(rollout::KvSlots& slots, int64_t s, int64_t length, double value) {
  EXPECT_EQ(slots.length(s), length) << "slot " << s;
  for (int64_t l = 0; l < slots.layers(); ++l) {
    EXPECT_TRUE(slots.k(l)[s].narrow(1, 0, length).eq(value).all().item<bool>()) << "slot " << s << " layer " << l;
    EXPECT_TRUE(slots.v(l)[s].narrow(1, 0, length).eq(-value).all().item<bool>()) << "slot " << s << " layer " << l;
  }
}

std::shared_ptr<model::DecoderModel> small_model() { return hpcrl::testing::random_model(hpcrl::testing::qwen2_arch()); }

TEST(DispatchCounter, CountsTheCallsHpcrlMakesNotTheOnesInsideThem) {
  EXPECT_EQ(rollout::DispatchCounter::now(), 0);  // no counter: nothing counted
  const at::Tensor a = at::ones({4});
  rollout::DispatchCounter counter;
  const at::Tensor b = a.add(a);         // 1 call
  const at::Tensor c = at::softmax(b, 0);  // 1 call (its own _softmax inside is not counted)
  EXPECT_EQ(counter.count(), 2);
  EXPECT_EQ(rollout::DispatchCounter::now(), 2);
  EXPECT_NEAR(c.sum().item<double>(), 1.0, 1e-6);  // 2 more: sum, then item's
  EXPECT_GE(counter.count(), 3);
}

TEST(DispatchCounter, ATallyAddsTheCallsMadeWhileItLives) {
  rollout::DispatchCounter counter;
  int64_t total = 5;
  const at::Tensor a = at::ones({4});  // before the tally: 1 call not added
  {
    const rollout::DispatchTally tally(total);
    const at::Tensor b = a.mul(a).add(a);  // 2 calls
  }
  EXPECT_EQ(total, 5 + 2);
}

TEST(KvSlotsMove, ABatchedMoveReadsEverySourceBeforeWritingAnySlot) {
  auto m = small_model();
  rollout::KvSlots slots = numbered_slots(*m);
  slots.move(std::vector<int64_t>{4, 3}, std::vector<int64_t>{3, 1});  // 3 takes 4's, 1 takes 3's as it was
  expect_slot(slots, 3, 5, 5.0);  // slot 4: 4 + 1 = 5 tokens of 5
  expect_slot(slots, 1, 4, 4.0);  // slot 3 before the move: 4 tokens of 4
  expect_slot(slots, 0, 1, 1.0);  // untouched
  expect_slot(slots, 4, 5, 5.0);  // a source keeps its tokens
}

TEST(KvSlotsMove, ABatchedMoveEqualsTheSameMovesOneByOne) {
  auto m = small_model();
  rollout::KvSlots one_by_one = numbered_slots(*m), batched = numbered_slots(*m);
  // Retiring rows 1 and 3 of 6: 5 -> 3, then 4 -> 1 (sources never targets, so the order does not matter).
  one_by_one.move(5, 3);
  one_by_one.move(4, 1);
  batched.move(std::vector<int64_t>{5, 4}, std::vector<int64_t>{3, 1});
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_EQ(batched.length(s), one_by_one.length(s)) << "slot " << s;
    for (int64_t l = 0; l < batched.layers(); ++l) {
      const int64_t n = batched.length(s);
      EXPECT_TRUE(batched.k(l)[s].narrow(1, 0, n).equal(one_by_one.k(l)[s].narrow(1, 0, n))) << s << " " << l;
      EXPECT_TRUE(batched.v(l)[s].narrow(1, 0, n).equal(one_by_one.v(l)[s].narrow(1, 0, n))) << s << " " << l;
    }
  }
}

TEST(KvSlotsMove, OneSlotCopiedIntoSeveral) {
  auto m = small_model();
  rollout::KvSlots slots = numbered_slots(*m);
  slots.move(std::vector<int64_t>{2, 2, 2}, std::vector<int64_t>{0, 4, 5});  // a prompt's slot to its samples
  for (int64_t s : {0, 2, 4, 5}) expect_slot(slots, s, 3, 3.0);  // slot 2: 3 tokens of 3
}

TEST(KvSlotsMove, TwoMovesIntoOneSlotAreRefused) {
  auto m = small_model();
  rollout::KvSlots slots = numbered_slots(*m);
  EXPECT_THROW(slots.move(std::vector<int64_t>{0, 1}, std::vector<int64_t>{2, 2}), RuntimeError);
}

TEST(KvSlotsMove, MovingFourSlotsMakesTheCallsOfMovingOne) {
  auto m = small_model();
  rollout::KvSlots slots = numbered_slots(*m);
  rollout::DispatchCounter counter;
  slots.move(std::vector<int64_t>{5}, std::vector<int64_t>{0});
  const int64_t one = counter.count();
  slots.move(std::vector<int64_t>{5, 4, 3, 2}, std::vector<int64_t>{0, 1, 2, 3});
  EXPECT_EQ(counter.count() - one, one);
  // 2 index tensors, each made and put on the device (a call even on the CPU), then per buffer
  // (3 layers x keys and values) narrow, index_select and index_copy_: 2 x 2 + 6 x 3 = 22.
  EXPECT_EQ(one, 22);
}

TEST(DeviceRowsMove, ABatchedMoveOfRowsReadsEverySourceFirst) {
  rollout::SamplingParams p;
  p.max_new_tokens = 4;
  rollout::DeviceRows rows(4, 2, p, at::kCPU, /*draw_table=*/true);
  rows.start(0, {10, 11, 12, 13}, {0, 0, 0, 0}, {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}});
  rows.move(std::vector<int64_t>{3, 0}, std::vector<int64_t>{0, 1});  // 0 takes 3's, 1 takes 0's as it was
  const at::Tensor want = at::tensor(std::vector<int64_t>{13, 10, 12, 13});
  EXPECT_TRUE(rows.positions(4).equal(want)) << rows.positions(4);
}

// Greedy one-token calls (prefill only) of `prompts` distinct 5-token prompts with `n` samples each, all
// admitted at once: the prefill's operator calls.
int64_t prefill_dispatches(int64_t prompts, int64_t n) {
  auto m = small_model();
  rollout::EngineOptions o;
  o.max_batch = 64;
  rollout::Engine engine(m, nullptr, o);
  std::vector<std::vector<int32_t>> ids;
  for (int32_t u = 0; u < prompts; ++u) ids.push_back({1 + u, 7, 3 + u, 9, 2});
  rollout::SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = 1;
  rollout::DispatchCounter counter;
  engine.generate(ids, n, p);
  EXPECT_EQ(engine.last_stats().prefill_forwards, 1);
  EXPECT_GT(engine.last_stats().prefill_dispatches, 0);
  return engine.last_stats().prefill_dispatches;
}

TEST(PrefillDispatches, DoNotGrowWithTheSamplesOfAPrompt) {
  // Samples past a prompt's first copy its slot: one batched move, whether 1 or 7 copies per prompt.
  EXPECT_EQ(prefill_dispatches(2, 8), prefill_dispatches(2, 2));
}

TEST(PrefillDispatches, DoNotGrowWithThePrompts) {
  // The prompts run as one [U, L] forward and each one's last hidden state is one gather.
  EXPECT_EQ(prefill_dispatches(6, 2), prefill_dispatches(2, 2));
}

TEST(ReplyPrefillDispatches, DoNotGrowWithTheRowsExtended) {
  // Replies of 1-4 tokens joining 2 rows, then 5 rows, after 3 cached tokens each: the same calls (one scatter per
  // layer's keys and values, whatever the rows).
  auto m = small_model();
  rollout::SlotProjections projections(*m);
  projections.prepare(/*pack=*/true);
  rollout::SlotForward forward(*m, int64_t(1) << 26, projections);
  const auto calls = [&](const std::vector<std::vector<int32_t>>& replies) {
    rollout::KvSlots slots(*m, 6, 12);
    for (int64_t s = 0; s < 6; ++s) slots.set_length(s, 3);
    rollout::DispatchCounter counter;
    forward.extend(slots, 0, replies);
    return counter.count();
  };
  EXPECT_EQ(calls({{5, 6, 7, 8}, {9}, {4, 4}, {7, 1, 2}, {3}}), calls({{5, 6, 7, 8}, {9}}));
}

}  // namespace
