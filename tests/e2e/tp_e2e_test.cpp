// End-to-end under mpirun: a tensor-parallel policy (tp=2) trains like the
// single-rank one — same SFT loss curve and gradient norms for the same seed.
#include <gtest/gtest.h>

#include <cmath>

#include "run_util.h"

using namespace hpcrl::test;

TEST(TensorParallelE2E, SftTp2FollowsTp1) {
  const std::string cfg = "tests/e2e/data/tiny.yaml --set 'stages=[{sft: {model: policy, data: arith, steps: 12, "
                          "batch: 16, lr: 3.0e-3}}]' --set run.eval_before_train=false";
  const std::string dir = scratch_dir("tp-sft");
  Proc one = run_hpcrl("run " + cfg + " --out " + dir + "/tp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + cfg + " --set models.policy.parallel.tp=2 --out " + dir + "/tp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("tp=2"), std::string::npos) << "the role runs tensor-parallel: " << two.output;
  auto a = lines_with(read_metrics(dir + "/tp1/metrics.jsonl"), "sft", "loss");
  auto b = lines_with(read_metrics(dir + "/tp2/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"loss", "grad_norm"}) {
      const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
      EXPECT_NEAR(y, x, 1e-4 * std::max(1.0, std::abs(x))) << key << " at step " << i + 1;
    }
  }
}
