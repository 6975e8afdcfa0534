// The non-matmul terms of the cost model (op_counts.h) against hand-worked
// counts for tiny-2l (2 layers, d = 128, 4 heads and 2 k/v heads of 32, MLP 384,
// vocabulary 272), and estimates that move the right way with them.
#include <gtest/gtest.h>

#include <algorithm>

#include "hpcrl/cost/op_counts.h"
#include "hpcrl/cost/phase_cost.h"
#include "test_profile.h"

namespace hpcrl::cost {
namespace {

const ModelArch kTiny2l = model_arch_preset("tiny-2l");

using cost_test::test_cpu;

TEST(OpCounts, LayerForwardValuesByHand) {
  // 2 rows of 8 tokens: N = 16, scores 2 rows · 4 heads · 8 · 8 = 512 values. Per layer
  // 20·16·128 + 14·16·(128 + 64) + 5·16·384 + 9·512 = 40960 + 43008 + 30720 + 4608 = 119296 values,
  // × 2 layers × 4 B; 56 ops per layer.
  const OpWork w = layers_forward_ops(kTiny2l, Layout{}, 2, 8, 8, 4);
  EXPECT_DOUBLE_EQ(w.bytes, 119296.0 * 2 * 4);
  EXPECT_DOUBLE_EQ(w.ops, 2.0 * kOpsPerLayer);
}

TEST(OpCounts, TensorParallelismSplitsTheHeadsAndTheMlpButNotTheResidualStream) {
  // tp = 2: q 64, kv 32 (one k/v head per rank), MLP 192, 2 heads → scores 256:
  // 40960 + 14·16·96 + 5·16·192 + 9·256 = 40960 + 21504 + 15360 + 2304 = 80128 values per layer.
  const OpWork w = layers_forward_ops(kTiny2l, Layout{2, 1, 1, 1, 2}, 2, 8, 8, 4);
  EXPECT_DOUBLE_EQ(w.bytes, 80128.0 * 2 * 4);
}

TEST(OpCounts, LogProbsOverTheVocabularyByHand) {
  // 16 positions × 272 entries, fp32: the forward 8 values each; with the entropy and the backward
  // 8 + 6 + 4 + 9 = 27.
  EXPECT_DOUBLE_EQ(logprob_ops(kTiny2l, Layout{}, 16, false, false).bytes, 8.0 * 16 * 272 * 4);
  const OpWork train = logprob_ops(kTiny2l, Layout{}, 16, true, true);
  EXPECT_DOUBLE_EQ(train.bytes, 27.0 * 16 * 272 * 4);
  EXPECT_DOUBLE_EQ(train.ops, double(kLogprobOps + kLogprobBackwardOps));
}

TEST(OpCounts, DecodeStepByHand) {
  // 4 sequences, 10 keys. Layers at one token each: N = 4, scores 4 · 4 heads · 1 · 10 = 160:
  // 20·4·128 + 14·4·192 + 5·4·384 + 9·160 = 10240 + 10752 + 7680 + 1440 = 30112 values per layer.
  // The strided cache copied: 2 (k, v) · 2 (read, write) · 4 · 10 · 64 values per layer.
  // Sampling: 7 · 4 · 272 fp32 values.
  const OpWork w = decode_step_ops(kTiny2l, Layout{}, 4, 10, 4);
  EXPECT_DOUBLE_EQ(w.bytes, (30112.0 * 2 + 2 * 2 * 4 * 10 * 64 * 2) * 4 + 7.0 * 4 * 272 * 4);
  EXPECT_DOUBLE_EQ(w.ops, 2.0 * kOpsPerLayer + kDecodeStepOps);
}

TEST(OpCounts, AdamWAsTensorOpsByHand) {
  // 1000 parameters · 108 B (92 B of update ops + 16 B of clip and zeroing); 10 tensors · 15 ops (the
  // gradient norm's 5, the update's 9, zero_grad's 1).
  const OpWork w = optimizer_ops(1000, 10, OptimizerKernel::kTensorOps);
  EXPECT_DOUBLE_EQ(w.bytes, 108000.0);
  EXPECT_DOUBLE_EQ(w.ops, 150.0);
}

TEST(OpCounts, AdamWFusedByHand) {
  // 1000 parameters · 44 B (28 B: w, g, m, v read and w, m, v written, 4 B each; + 16 B); 10 tensors · 7 ops
  // (the gradient norm's 5, the fused pass, zero_grad's 1).
  const OpWork w = optimizer_ops(1000, 10, OptimizerKernel::kCpuPass);
  EXPECT_DOUBLE_EQ(w.bytes, 44000.0);
  EXPECT_DOUBLE_EQ(w.ops, 70.0);
}

TEST(OpCounts, AdamWMultiTensorIsAFixedNumberOfOpsWhateverTheTensorCount) {
  // 1000 parameters · 44 B (the fused kernel's 28 B + 16 B of clip and zeroing); 3 sharding kinds · 7 norm
  // ops + clip 1 + zero_grad 1 + step tensor and update 2 = 25 ops, for 10 tensors or 1000.
  for (double tensors : {10.0, 1000.0}) {
    const OpWork w = optimizer_ops(1000, tensors, OptimizerKernel::kMultiTensor);
    EXPECT_DOUBLE_EQ(w.bytes, 44000.0);
    EXPECT_DOUBLE_EQ(w.ops, 25.0);
  }
}

TEST(OpCounts, ElementWiseWorkIsALargerShareOfASmallModel) {
  // The same 8 × 64 tokens: the element-wise seconds relative to the matmul seconds fall with the width.
  const HardwareProfile hw = test_cpu();
  auto share = [&](const ModelArch& a) {
    const PhaseCost c = training_pass(a, Layout{}, hw, {8, 64, 0, false, true}, 4);
    return (c.elementwise_s + c.overhead_s) / c.compute_s;
  };
  EXPECT_GT(share(kTiny2l), 2 * share(model_arch_preset("base-100m")));
}

TEST(OpCounts, CheckpointingRecomputesTheForwardsOps) {
  const HardwareProfile hw = test_cpu();
  const PhaseCost plain = training_pass(kTiny2l, Layout{}, hw, {8, 64, 0, false, false}, 4);
  const PhaseCost ckpt = training_pass(kTiny2l, Layout{}, hw, {8, 64, 0, true, false}, 4);
  const OpWork layers = layers_forward_ops(kTiny2l, Layout{}, 8, 64, 64, 4);
  EXPECT_DOUBLE_EQ(ckpt.elementwise_bytes - plain.elementwise_bytes, layers.bytes);
  EXPECT_DOUBLE_EQ(ckpt.ops - plain.ops, layers.ops);
}

TEST(OpCounts, LongerPaddedRowsCostMore) {
  // A batch padded to its longest row (64 tokens) costs more than the same rows at their mean (40).
  const HardwareProfile hw = test_cpu();
  EXPECT_GT(training_pass(kTiny2l, Layout{}, hw, {8, 64, 0, false, false}, 4).seconds(),
            training_pass(kTiny2l, Layout{}, hw, {8, 40, 0, false, false}, 4).seconds() * 1.4);
}

TEST(OpCounts, AsynchronousLaunchesHideBehindTheWork) {
  // One decode step of one sequence: on a CPU (synchronous) the launches add to the work; with asynchronous
  // launches the step costs the larger of the two.
  HardwareProfile sync = test_cpu(), async = test_cpu();
  async.async_launch = true;
  const PhaseCost s = rollout(kTiny2l, Layout{}, sync, RolloutShape{1, 1, 1, 1, 1}, 4).decode;
  const PhaseCost a = rollout(kTiny2l, Layout{}, async, RolloutShape{1, 1, 1, 1, 1}, 4).decode;
  const double work = s.roofline_s + s.elementwise_s, launches = s.ops * sync.kernel_overhead_s;
  EXPECT_DOUBLE_EQ(s.overhead_s, launches);
  EXPECT_NEAR(a.seconds(), std::max(work, launches), 1e-15);
}

TEST(OpCounts, AReplayedDecodeGraphPaysTheGraphKernelOverheadPerOp) {
  // The same step launched op by op (10 us each) and replayed as a CUDA graph (2 us a kernel): the same
  // kernels and work; launch-bound either way at one row of tiny-2l, so each costs ops × its overhead.
  HardwareProfile gpu = test_cpu();
  gpu.async_launch = true;
  gpu.kernel_overhead_s = 1e-5;
  gpu.graph_kernel_overhead_s = 2e-6;
  const PhaseCost eager = rollout(kTiny2l, Layout{}, gpu, RolloutShape{1, 1, 1, 1, 1}, 4, EngineMode{}).decode;
  const PhaseCost graph = rollout(kTiny2l, Layout{}, gpu, RolloutShape{1, 1, 1, 1, 1}, 4, EngineMode{true}).decode;
  EXPECT_EQ(graph.ops, eager.ops);
  EXPECT_EQ(graph.roofline_s + graph.elementwise_s, eager.roofline_s + eager.elementwise_s);
  EXPECT_NEAR(eager.seconds(), eager.ops * 1e-5, 1e-15);
  EXPECT_NEAR(graph.seconds(), graph.ops * 2e-6, 1e-15);
}

}  // namespace
}  // namespace hpcrl::cost
