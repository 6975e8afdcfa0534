// End-to-end: `hpcrl calibrate` writes a profile that `plan --estimate
// --hardware FILE` loads, with the links measured as the launch allows: two
// ranks on this one node give the intra-node link's ring and point-to-point
// values (and inter_node repeats them); one rank measures no link and says so.
// Every run measures what an eager op costs end to end (eager_op_s) and an op of a
// training pass (train_op_s); on a CPU the CUDA-graph replay cost is not measured,
// and the file says so.
#include <gtest/gtest.h>

#include <filesystem>

#include "hpcrl/cost/hardware_profile.h"
#include "run_util.h"

using namespace hpcrl::test;

namespace {

TEST(CalibrateE2E, TwoRanksMeasureTheIntraNodeLinkAsARingAndPointToPoint) {
  const std::string dir = scratch_dir("calibrate2");
  std::filesystem::create_directories(dir);
  const Proc p = run_hpcrl("calibrate --out " + dir + "/two.yaml", 2);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const hpcrl::cost::HardwareProfile hw = hpcrl::cost::load_profile(dir + "/two.yaml");
  EXPECT_EQ(hw.gpus_per_node, 2);
  EXPECT_GT(hw.intra_node.bandwidth, 0.0);
  EXPECT_GT(hw.intra_node.p2p_bandwidth, 0.0);
  EXPECT_GT(hw.intra_node.p2p_latency_s, 0.0);
  // One node: nothing crosses nodes, so inter_node is the same link.
  EXPECT_EQ(hw.inter_node.p2p_bandwidth, hw.intra_node.p2p_bandwidth);
  EXPECT_EQ(hw.inter_node.latency_s, hw.intra_node.latency_s);
  const std::string text = read_text(dir + "/two.yaml");
  EXPECT_NE(text.find("a ping-pong between rank 0 and the next rank on its node"), std::string::npos) << text;
  EXPECT_NE(text.find("inter_node = intra_node (one node"), std::string::npos) << text;
  const Proc plan = run_hpcrl("plan tests/e2e/data/grpo_judge.yaml --world 2 --estimate --hardware " + dir + "/two.yaml");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
}

TEST(CalibrateE2E, OneRankMeasuresNoLinkAndSaysSo) {
  const std::string dir = scratch_dir("calibrate1");
  std::filesystem::create_directories(dir);
  const Proc p = run_hpcrl("calibrate --out " + dir + "/one.yaml");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const hpcrl::cost::HardwareProfile hw = hpcrl::cost::load_profile(dir + "/one.yaml");
  EXPECT_EQ(hw.gpus_per_node, 1);
  EXPECT_EQ(hw.intra_node.p2p_bandwidth, 0.0);  // no pair to time
  EXPECT_NE(read_text(dir + "/one.yaml").find("intra_node: NOT measured (one rank on node 0"), std::string::npos);
}

TEST(CalibrateE2E, WritesTheEagerAndTrainingOpCostsAndOnACpuNoGraphReplayCost) {
  const std::string dir = scratch_dir("calibrate_ops");
  std::filesystem::create_directories(dir);
  const Proc p = run_hpcrl("calibrate --out " + dir + "/ops.yaml");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const hpcrl::cost::HardwareProfile hw = hpcrl::cost::load_profile(dir + "/ops.yaml");
  // Measured and charged: eager_op_s for ops the host dispatches, train_op_s for a training pass's.
  EXPECT_GT(hw.eager_op_s, 0.0);
  EXPECT_EQ(hw.op_seconds(), hw.eager_op_s);
  EXPECT_GT(hw.train_op_s, 0.0);
  EXPECT_EQ(hw.train_op_seconds(), hw.train_op_s);
  EXPECT_EQ(hw.graph_kernel_overhead_s, 0.0);  // a CPU has no CUDA graphs: not written
  const std::string text = read_text(dir + "/ops.yaml");
  EXPECT_NE(text.find("\neager_op_s: "), std::string::npos) << text;
  EXPECT_NE(text.find("\ntrain_op_s: "), std::string::npos) << text;
  EXPECT_NE(text.find("graph_kernel_overhead_s: not measured (a CPU has no CUDA graphs)"), std::string::npos) << text;
}

}  // namespace
