// Learning-rate schedules: linear warm-up, then constant, linear or cosine decay
// to min_lr_ratio·lr at `total_steps`.
#pragma once

namespace hpcrl::optim {

// After the warm-up: the rate stays, or falls linearly or along a half cosine.
enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  LrDecay kind = LrDecay::kCosine;
  double lr = 1e-3;
  long warmup_steps = 0;
  long total_steps = 1;
  double min_lr_ratio = 0.1;

  // Learning rate for 0-based `step`.
  double at(long step) const;
};

}  // namespace hpcrl::optim
