// The profile's measured per-op costs (hardware_profile.h): `eager_op_s` (one eager LibTorch op end to end,
// as `hpcrl calibrate` times a chain of small ops), `train_op_s` (one op of a training pass: recorded for
// autograd, its backward's share included) and `graph_kernel_overhead_s` (one kernel replayed from a CUDA
// graph) parse, round-trip and are range-checked, and the estimate charges eager_op_s per op in place of
// kernel_overhead_s, and train_op_s per op of a forward/backward pass, where a profile has them.
#include <gtest/gtest.h>

#include "hpcrl/cost/op_counts.h"
#include "hpcrl/cost/phase_cost.h"
#include "hpcrl/util/error.h"
#include "test_profile.h"

namespace hpcrl::cost {
namespace {

using cost_test::test_cpu;

const ModelArch kTiny2l = model_arch_preset("tiny-2l");

// A profile without the per-op keys; line 8 is the first after it.
const std::string kBase =
    "name: x\ncompute: {peak_flops: 3e10, efficiency: 1}\nmemory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\n"
    "kernel_overhead_s: 2e-6\ngpus_per_node: 1\n"
    "intra_node: {bandwidth: 1e9, latency_s: 1e-6}\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n";

using cost_test::profile_error;

TEST(MeasuredOpCost, EagerOpSecondsIsOptionalAndRoundTrips) {
  const HardwareProfile without = parse_profile(kBase, "x.yaml");
  EXPECT_EQ(without.eager_op_s, 0.0);             // not measured
  EXPECT_EQ(without.op_seconds(), 2e-6);          // kernel_overhead_s stands in
  const HardwareProfile with = parse_profile(kBase + "eager_op_s: 1.5e-5\n", "x.yaml");
  EXPECT_EQ(with.eager_op_s, 1.5e-5);
  EXPECT_EQ(with.op_seconds(), 1.5e-5);
  EXPECT_EQ(with.kernel_overhead_s, 2e-6);        // kept as given
  EXPECT_EQ(parse_profile(profile_yaml(with, "written"), "y.yaml").eager_op_s, 1.5e-5);
  EXPECT_EQ(profile_yaml(without, "written").find("eager_op_s"), std::string::npos);  // not written when not measured
}

TEST(MeasuredOpCost, EagerOpSecondsOutsideItsRangeIsAnErrorAtItsLine) {
  EXPECT_EQ(profile_error(kBase + "eager_op_s: 0\n"), "x.yaml:8: `eager_op_s` must be positive, not 0");
  EXPECT_EQ(profile_error(kBase + "eager_op_s: -1e-6\n"), "x.yaml:8: `eager_op_s` must be positive, not -1e-6");
  EXPECT_EQ(profile_error(kBase + "eager_op_s: fast\n"), "x.yaml:8: `eager_op_s` must be a number, not fast");
  // 12 written for 12 µs: seconds per op are at most 10 ms.
  EXPECT_EQ(profile_error(kBase + "eager_op_s: 12\n"),
            "x.yaml:8: `eager_op_s` is seconds per op, at most 0.01 (10 ms), not 12; rerun `hpcrl calibrate` or give "
            "it in seconds");
  EXPECT_EQ(profile_error(kBase + "eager_op_s: 0.01\n"), "no error");  // the bound itself is allowed
}

TEST(MeasuredOpCost, TrainOpSecondsIsOptionalRoundTripsAndElseTheEagerCostStandsIn) {
  const HardwareProfile eager_only = parse_profile(kBase + "eager_op_s: 1.5e-5\n", "x.yaml");
  EXPECT_EQ(eager_only.train_op_s, 0.0);
  EXPECT_EQ(eager_only.train_op_seconds(), 1.5e-5);  // eager_op_s stands in
  const HardwareProfile both = parse_profile(kBase + "eager_op_s: 1.5e-5\ntrain_op_s: 4e-5\n", "x.yaml");
  EXPECT_EQ(both.train_op_seconds(), 4e-5);
  EXPECT_EQ(both.op_seconds(), 1.5e-5);              // other ops keep the eager cost
  EXPECT_EQ(parse_profile(profile_yaml(both, "written"), "y.yaml").train_op_s, 4e-5);
  EXPECT_EQ(profile_error(kBase + "train_op_s: 40\n"),
            "x.yaml:8: `train_op_s` is seconds per op, at most 0.01 (10 ms), not 40; rerun `hpcrl calibrate` or give "
            "it in seconds");
}

TEST(MeasuredOpCost, GraphKernelOverheadHasTheSameRange) {
  EXPECT_EQ(profile_error(kBase + "graph_kernel_overhead_s: 0.5\n"),
            "x.yaml:8: `graph_kernel_overhead_s` is seconds per op, at most 0.01 (10 ms), not 0.5; rerun `hpcrl "
            "calibrate` or give it in seconds");
}

TEST(MeasuredOpCost, AMisspeltKeyIsRejectedNamingTheKeys) {
  EXPECT_EQ(profile_error(kBase + "eager_ops_s: 1e-5\n"),
            "x.yaml:8: unknown key `eager_ops_s` in a hardware profile; the keys are name, compute, memory, "
            "kernel_overhead_s, eager_op_s, train_op_s, graph_kernel_overhead_s, kernel_launch, gpus_per_node, "
            "intra_node, inter_node");
}

TEST(MeasuredOpCost, APieceChargesTheMeasuredEagerOpCostPerOp) {
  // test_cpu (synchronous launch, 30 GFLOP/s, 10 GB/s, kernel_overhead_s 2 µs) with eager_op_s 5 µs:
  // 100 ops cost 100 × 5e-6 = 5e-4 s of launches (not 100 × 2e-6 = 2e-4), beside 3e8 FLOPs / 3e10 = 0.01 s
  // of matmul and 1e7 B / 1e10 = 1e-3 s element-wise; synchronous: all of it adds up to 0.0115 s.
  HardwareProfile hw = test_cpu();
  hw.eager_op_s = 5e-6;
  PhaseCost c;
  c.add_work(3e8, 0, hw, 128, OpWork{1e7, 100});
  EXPECT_DOUBLE_EQ(c.overhead_s, 5e-4);
  EXPECT_DOUBLE_EQ(c.seconds(), 0.01 + 1e-3 + 5e-4);
}

TEST(MeasuredOpCost, AsynchronousLaunchesChargeTheMeasuredCostBeyondTheWork) {
  // A GPU-like profile (asynchronous) with eager_op_s 1.2e-5: 1000 ops cost 1000 × 1.2e-5 = 0.012 s of
  // launches against 3e8 / 3e10 = 0.01 s of matmul and 1e7 / 1e10 = 1e-3 s element-wise; the piece costs the
  // larger, 0.012 s, so launches add 0.012 − 0.011 = 1e-3 s. With kernel_overhead_s (2 µs: 2e-3 s of
  // launches) they would hide entirely.
  HardwareProfile hw = test_cpu();
  hw.async_launch = true;
  hw.eager_op_s = 1.2e-5;
  PhaseCost c;
  c.add_work(3e8, 0, hw, 128, OpWork{1e7, 1000});
  EXPECT_NEAR(c.overhead_s, 1e-3, 1e-15);
  EXPECT_NEAR(c.seconds(), 0.012, 1e-15);
}

TEST(MeasuredOpCost, TheOptimizerStepChargesEachDispatchedOpTheMeasuredCost) {
  // tiny-2l has 2 layers × 9 + 3 = 21 parameter tensors; on a CPU profile (synchronous: the fused update)
  // each dispatches 7 ops (gradient norm 5, the fused pass, zero_grad): 147 ops × 4e-6 = 5.88e-4 s.
  HardwareProfile hw = test_cpu();
  hw.eager_op_s = 4e-6;
  const PhaseCost c = optimizer_step(kTiny2l, Layout{}, hw, 0);
  EXPECT_DOUBLE_EQ(c.ops, 147.0);
  EXPECT_DOUBLE_EQ(c.overhead_s, 147 * 4e-6);
}

TEST(MeasuredOpCost, ATrainingPassChargesTheTrainingOpCostAndAForwardTheEagerOne) {
  // One row of one token through tiny-2l (asynchronous: launch-bound at 1e-3 s an op, far above its work).
  // Training: forward 2 layers × 56 = 112 ops, backward 1.5 × 112 = 168, log-probs 12 + 8, 40 around the
  // micro-batch: 340 ops × train_op_s 1e-3 = 0.34 s. A no-grad forward: 112 + 12 + 40 = 164 ops × eager_op_s
  // 1e-4 = 0.0164 s.
  HardwareProfile hw = test_cpu();
  hw.async_launch = true;
  hw.eager_op_s = 1e-4;
  hw.train_op_s = 1e-3;
  const PhaseCost train = training_pass(kTiny2l, Layout{}, hw, {1, 1, 0, false, false}, 4);
  const PhaseCost forward = forward_pass(kTiny2l, Layout{}, hw, 1, 1, 0, 4);
  EXPECT_DOUBLE_EQ(train.ops, 340.0);
  EXPECT_NEAR(train.seconds(), 0.34, 1e-12);
  EXPECT_DOUBLE_EQ(forward.ops, 164.0);
  EXPECT_NEAR(forward.seconds(), 0.0164, 1e-12);
}

TEST(MeasuredOpCost, AReplayedDecodeGraphStillPaysTheGraphKernelCost) {
  // eager_op_s describes ops the host dispatches; a replayed graph's kernels are not dispatched, so
  // --decode-graphs costs them at graph_kernel_overhead_s (2 µs) whatever eager_op_s (15 µs) says. One
  // decode step of one tiny-2l row is launch-bound either way: ops × the per-op cost.
  HardwareProfile gpu = test_cpu();
  gpu.async_launch = true;
  gpu.eager_op_s = 1.5e-5;
  gpu.graph_kernel_overhead_s = 2e-6;
  const PhaseCost eager = rollout(kTiny2l, Layout{}, gpu, RolloutShape{1, 1, 1, 1, 1}, 4, EngineMode{}).decode;
  const PhaseCost graph = rollout(kTiny2l, Layout{}, gpu, RolloutShape{1, 1, 1, 1, 1}, 4, EngineMode{true}).decode;
  EXPECT_NEAR(eager.seconds(), eager.ops * 1.5e-5, 1e-15);
  EXPECT_NEAR(graph.seconds(), graph.ops * 2e-6, 1e-15);
}

}  // namespace
}  // namespace hpcrl::cost
