// Learning-rate schedules: linear warm-up, then constant, linear or cosine decay
// to min_lr_ratio·lr at `total_steps`.
#pragma once

#include <string>

namespace hpcrl::optim {

struct LrSchedule {
  std::string kind = "cosine";  // constant | linear | cosine
  double lr = 1e-3;
  long warmup_steps = 0;
  long total_steps = 1;
  double min_lr_ratio = 0.1;

  // Learning rate for 0-based `step`.
  double at(long step) const;
};

}  // namespace hpcrl::optim
