// Phase costs: the communication bytes of a tp = 2 × pp = 2 training step by
// hand, and estimates that move the right way with the layout.
#include <gtest/gtest.h>

#include "hpcrl/cost/phase_cost.h"
#include "hpcrl/cost/work_depth.h"

namespace hpcrl::cost {
namespace {

const ModelArch kTiny2l = model_arch_preset("tiny-2l");

HardwareProfile test_gpu() {
  HardwareProfile p;
  p.name = "test";
  p.peak_flops = 100e12;
  p.memory_bandwidth = 2e12;
  p.memory_capacity = 80e9;
  p.kernel_overhead_s = 1e-5;
  p.gpus_per_node = 4;
  p.intra_node = {300e9, 8e-6};
  p.inter_node = {25e9, 1.5e-5};
  return p;
}

TEST(PhaseCost, Tp2Pp2TrainingStepMovesTheHandCountedBytes) {
  // 4 sequences of 8 tokens, micro-batches of 2 rows (2 of them), fp32, L = 2 → 1 layer per pp stage.
  // tp: a micro-batch's activations are 2·8 tokens · 128 · 4 B = 8192 B; 2 all-reduces per layer forward
  //     and 2 backward → 4 · 8192 per micro-batch = 32768, × 2 micro-batches = 65536
  // pp: one 8192 B send per micro-batch forward and one backward → 2 · 2 · 8192 = 32768
  const Layout l{2, 1, 2, 1, 4};
  const PhaseCost c = training_pass(kTiny2l, l, test_gpu(), {4, 8, 2, false, false}, 4);
  EXPECT_DOUBLE_EQ(c.comm_bytes, 65536.0 + 32768.0);
}

TEST(PhaseCost, DoublingTpHalvesTheWeightBytesEachDecodeStepReads) {
  const HardwareProfile hw = test_gpu();
  // One sequence, a one-token prompt, one decode step: weights/tp + KV/tp + the logits (not split).
  const double logits = 272.0 * 4 * 3;
  const RolloutCost tp1 = rollout(kTiny2l, Layout{1, 1, 1, 1, 1}, hw, RolloutShape{1, 1, 1, 1, 64}, 4);
  const RolloutCost tp2 = rollout(kTiny2l, Layout{2, 1, 1, 1, 2}, hw, RolloutShape{1, 1, 1, 1, 64}, 4);
  EXPECT_DOUBLE_EQ((tp1.decode.bytes - logits) / (tp2.decode.bytes - logits), 2.0);
  EXPECT_GT(tp2.decode.comm_s, 0.0);  // and pays two all-reduces per layer for it
  EXPECT_EQ(tp1.decode.comm_s, 0.0);
}

TEST(PhaseCost, PipelineSendsMoveAtThePointToPointLinkAndCollectivesAtTheRingOne) {
  HardwareProfile hw = test_gpu();
  const Layout tp2pp2{2, 1, 2, 1, 4};
  const PhaseCost ring = training_pass(kTiny2l, tp2pp2, hw, {4, 8, 2, false, false}, 4);
  hw.intra_node.p2p_bandwidth = hw.intra_node.bandwidth / 2;
  hw.intra_node.p2p_latency_s = hw.intra_node.latency_s;
  const PhaseCost p2p = training_pass(kTiny2l, tp2pp2, hw, {4, 8, 2, false, false}, 4);
  // pp sends 32768 B (the hand count above) at 150e9 instead of 300e9 B/s: 32768/150e9 − 32768/300e9
  // = 32768/300e9 s more; tp's all-reduces are unchanged.
  EXPECT_NEAR(p2p.comm_s - ring.comm_s, 32768.0 / 300e9, 1e-15);
  EXPECT_DOUBLE_EQ(p2p.comm_bytes, ring.comm_bytes);
}

TEST(PhaseCost, MoreMicroBatchesShrinkThePipelineBubble) {
  const HardwareProfile hw = test_gpu();
  const Layout pp2{1, 1, 2, 1, 2};
  const PhaseCost one = training_pass(kTiny2l, pp2, hw, {8, 64, 8, false, false}, 4);  // 1 micro-batch
  const PhaseCost four = training_pass(kTiny2l, pp2, hw, {8, 64, 2, false, false}, 4); // 4 micro-batches
  // (p − 1)/m of the work (matmuls, element-wise ops and launches): 1/1 and 1/4
  EXPECT_NEAR(one.bubble_s / (one.roofline_s + one.elementwise_s + one.overhead_s), 1.0, 1e-12);
  EXPECT_NEAR(four.bubble_s / (four.roofline_s + four.elementwise_s + four.overhead_s), 0.25, 1e-12);
  EXPECT_EQ(training_pass(kTiny2l, Layout{1, 1, 1, 1, 1}, hw, {8, 64, 2, false, false}, 4).bubble_s, 0.0);
}

TEST(PhaseCost, SmallBatchDecodeIsMemoryBoundAndLargeBatchComputeBound) {
  ModelArch big = model_arch_preset("base-100m");
  const HardwareProfile hw = test_gpu();
  const RolloutCost one = rollout(big, Layout{}, hw, RolloutShape{1, 16, 8, 8, 1}, 2);
  EXPECT_GT(one.decode.memory_s, one.decode.compute_s);
  const RolloutCost many = rollout(big, Layout{}, hw, RolloutShape{4096, 16, 8, 8, 4096}, 2);
  EXPECT_GT(many.decode.compute_s, many.decode.memory_s);
}

TEST(PhaseCost, PartialRolloutsDropTheTailDecodedAloneAndNothingElse) {
  const HardwareProfile hw = test_gpu();
  // 8 sequences, 4 slots, mean response 10, longest 30: ceil(8·10/4) = 20 full-slot steps, then the
  // longest decodes its last 30 − 10 = 20 steps alone, which partial rollouts leave to the next iteration.
  const EngineMode partial{false, true};
  const RolloutCost waits = rollout(kTiny2l, Layout{}, hw, RolloutShape{8, 4, 10, 30, 4}, 4);
  const RolloutCost paused = rollout(kTiny2l, Layout{}, hw, RolloutShape{8, 4, 10, 30, 4}, 4, partial);
  const RolloutCost no_tail = rollout(kTiny2l, Layout{}, hw, RolloutShape{8, 4, 10, 10, 4}, 4);
  EXPECT_DOUBLE_EQ(paused.decode.seconds(), no_tail.decode.seconds());
  EXPECT_DOUBLE_EQ(paused.prefill.seconds(), waits.prefill.seconds());
  // The 20 lone steps are each a whole decode step (weights read, launches paid) for one sequence.
  EXPECT_GT(waits.decode.seconds() - paused.decode.seconds(), 20 * hw.kernel_overhead_s);
}

// Multi-turn rollouts: a row waiting for a tool keeps its slot.
RolloutShape with_tools(RolloutShape s, double calls, double seconds, double reply_tokens) {
  s.tool_calls = calls, s.tool_seconds = seconds, s.reply_tokens = reply_tokens;
  return s;
}

TEST(PhaseCost, InstantToolCallsAddOnlyTheRepliesPrefill) {
  // The calculator (0 s): no row waits, so the decode is the single-turn one (20 full-slot steps, a 20-step tail);
  // each of the 8 · 2 replies of 8 tokens is prefilled.
  const HardwareProfile hw = test_gpu();
  const RolloutShape plain{8, 4, 10, 30, 4};
  const RolloutCost single = rollout(kTiny2l, Layout{}, hw, plain, 4);
  const RolloutCost calc = rollout(kTiny2l, Layout{}, hw, with_tools(plain, 2, 0, 8), 4);
  EXPECT_DOUBLE_EQ(calc.decode.seconds(), single.decode.seconds());
  EXPECT_DOUBLE_EQ(calc.tool_wait_s, 0.0);
  EXPECT_GT(calc.prefill.flops, single.prefill.flops);
}

TEST(PhaseCost, WhereAStepCostsTheSameAtAnyRowCountToolCallsAddTheirSlotTime) {
  // tiny-2l on the test GPU: a decode step is kernel launches, the same at 64 rows as at 50. 128 responses of
  // 10 tokens in 64 slots, 2 calls of 50 ms each: the slots' time is 128 · (10 steps + 2 · 50 ms) / 64, i.e. the
  // 20 single-turn steps plus 128 · 0.1 s / 64 = 0.2 s.
  const HardwareProfile hw = test_gpu();
  const RolloutShape plain{128, 4, 10, 10, 64};
  const RolloutCost single = rollout(kTiny2l, Layout{}, hw, plain, 4);
  const RolloutCost calls = rollout(kTiny2l, Layout{}, hw, with_tools(plain, 2, 0.05, 8), 4);
  EXPECT_NEAR(calls.decode.seconds(), single.decode.seconds() + 0.2, 0.01 * 0.2);
  EXPECT_NEAR(calls.tool_wait_s, 0.2, 0.01 * 0.2);
}

TEST(PhaseCost, WhereAStepCostsPerRowTheOtherRowsDecodingHidesTheCalls) {
  // A machine slow at matmuls and free of launch cost: a step costs its rows' FLOPs, so rows parked for a call
  // make the others' steps cheaper and the total is the tokens' work either way (the ceil of the live rows aside).
  HardwareProfile hw = test_gpu();
  hw.peak_flops = 1e9;
  hw.kernel_overhead_s = 0;
  const RolloutShape plain{256, 4, 10, 10, 64};
  const RolloutCost single = rollout(kTiny2l, Layout{}, hw, plain, 4);
  const RolloutCost calls = rollout(kTiny2l, Layout{}, hw, with_tools(plain, 2, 0.05, 8), 4);
  EXPECT_NEAR(calls.decode.seconds(), single.decode.seconds(), 0.03 * single.decode.seconds());
}

TEST(PhaseCost, NoResponseEndsBeforeItsOwnStepsAndCalls) {
  // 4 responses in 4 slots, 2 calls of 1 s: whatever the steps cost, each response waits 2 s for its calls.
  const HardwareProfile hw = test_gpu();
  const RolloutCost calls = rollout(kTiny2l, Layout{}, hw, with_tools(RolloutShape{4, 4, 10, 10, 4}, 2, 1.0, 8), 4);
  EXPECT_GT(calls.decode.seconds(), 2.0);
  EXPECT_LT(calls.decode.seconds(), 2.1);
}

TEST(PhaseCost, DataParallelismSplitsTheSequencesAndAddsTheGradientAllReduce) {
  const HardwareProfile hw = test_gpu();
  const PhaseCost dp1 = training_pass(kTiny2l, Layout{1, 1, 1, 1, 1}, hw, {8, 64, 0, false, false}, 4);
  const PhaseCost dp2 = training_pass(kTiny2l, Layout{1, 1, 1, 1, 2}, hw, {8, 64, 0, false, false}, 4);
  EXPECT_DOUBLE_EQ(dp1.flops, 2 * dp2.flops);
  EXPECT_EQ(gradient_sync(kTiny2l, Layout{1, 1, 1, 1, 1}, hw, 4).comm_s, 0.0);
  EXPECT_GT(gradient_sync(kTiny2l, Layout{1, 1, 1, 1, 2}, hw, 4).comm_s, 0.0);
}

TEST(PhaseCost, GradientSyncShowsWhatTheLastBackwardDoesNotHideAndAtLeastTheLastBucket) {
  const HardwareProfile hw = test_gpu();
  const Layout dp2{1, 1, 1, 1, 2};
  // base-100m's fp32 gradients are many 8 MiB buckets; at dp 2 a ring all-reduce of B bytes takes
  // 2·(1/2)·B / 300e9 + 2·1·8e-6 s on the intra-node link.
  const ModelArch big = model_arch_preset("base-100m");
  const double grads = weight_bytes(big, 4);
  const double whole = grads / 300e9 + 16e-6, last_bucket = double(8u << 20) / 300e9 + 16e-6;
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4).comm_s, whole);              // nothing to hide behind
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {0.25 * whole}).comm_s, 0.75 * whole);
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole}).comm_s, last_bucket);  // a long backward
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole}).comm_bytes, grads);   // the bytes all move
  // tiny-2l's gradients fit one bucket, complete only when the backward ends: none of it hides.
  const double tiny = gradient_sync(kTiny2l, dp2, hw, 4).comm_s;
  EXPECT_DOUBLE_EQ(gradient_sync(kTiny2l, dp2, hw, 4, {1.0}).comm_s, tiny);
}

TEST(PhaseCost, ZeroOneReduceScattersOnceAfterTheBackwardAndZeroTwoBehindEveryMicroBatch) {
  const HardwareProfile hw = test_gpu();
  const Layout dp2{1, 1, 1, 1, 2};
  // At dp 2 a ring reduce-scatter of B bytes takes (1/2)·B / 300e9 + 1·8e-6 s: half an all-reduce's bytes.
  const ModelArch big = model_arch_preset("base-100m");
  const double grads = weight_bytes(big, 4);
  const double whole = grads / 2 / 300e9 + 8e-6, last_bucket = double(8u << 20) / 2 / 300e9 + 8e-6;
  // ZeRO-1: nothing overlaps, however long the backward.
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole, 1}).comm_s, whole);
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole, 1}).comm_bytes, grads);
  // ZeRO-2, 3 micro-batches: each pays what its backward does not hide, at least its last bucket.
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {0.25 * whole, 2, 3}).comm_s, 3 * 0.75 * whole);
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole, 2, 3}).comm_s, 3 * last_bucket);
  EXPECT_DOUBLE_EQ(gradient_sync(big, dp2, hw, 4, {10 * whole, 2, 3}).comm_bytes, 3 * grads);
}

}  // namespace
}  // namespace hpcrl::cost
