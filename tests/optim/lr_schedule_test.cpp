// LR schedules at their defining points.
#include <gtest/gtest.h>

#include <cmath>

#include "hpcrl/optim/lr_schedule.h"
#include "hpcrl/util/error.h"

using hpcrl::optim::LrDecay;
using hpcrl::optim::LrSchedule;

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{LrDecay::kCosine, 1.0, 4, 104, 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(54), 0.55, 1e-12);  // halfway: min + (1-min)/2
  EXPECT_NEAR(s.at(104), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);
}

TEST(LrSchedule, LinearAndConstant) {
  LrSchedule lin{LrDecay::kLinear, 2.0, 0, 10, 0.0};
  EXPECT_DOUBLE_EQ(lin.at(0), 2.0);
  EXPECT_DOUBLE_EQ(lin.at(5), 1.0);
  LrSchedule c{LrDecay::kConstant, 3.0, 2, 10, 0.0};
  EXPECT_DOUBLE_EQ(c.at(0), 1.5);
  EXPECT_DOUBLE_EQ(c.at(9), 3.0);
}
