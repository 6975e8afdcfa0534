// End-to-end: `hpcrl calibrate` writes a profile that `plan --estimate
// --hardware FILE` loads, with the links measured as the launch allows: two
// ranks on this one node give the intra-node link's ring and point-to-point
// values (and inter_node repeats them); one rank measures no link and says so.
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

}  // namespace
