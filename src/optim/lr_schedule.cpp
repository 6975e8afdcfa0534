// LR schedule values (see lr_schedule.h).
#include "hpcrl/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>


namespace hpcrl::optim {

double LrSchedule::at(long step) const {
  if (warmup_steps > 0 && step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  const long decay_steps = std::max(1L, total_steps - warmup_steps);
  const double progress = std::clamp(double(step - warmup_steps) / double(decay_steps), 0.0, 1.0);
  const double min_lr = lr * min_lr_ratio;
  switch (kind) {
    case LrDecay::kConstant: return lr;
    case LrDecay::kLinear: return lr - (lr - min_lr) * progress;
    case LrDecay::kCosine: return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
  return lr;
}

}  // namespace hpcrl::optim
