// LR schedule values (see lr_schedule.h).
#include "hpcrl/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

double LrSchedule::at(long step) const {
  if (warmup_steps > 0 && step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  if (kind == "constant") return lr;
  long decay_steps = std::max(1L, total_steps - warmup_steps);
  double progress = std::clamp(double(step - warmup_steps) / double(decay_steps), 0.0, 1.0);
  double min_lr = lr * min_lr_ratio;
  if (kind == "linear") return lr - (lr - min_lr) * progress;
  HPCRL_CHECK_INPUT(kind == "cosine", "unknown lr schedule '" << kind << "': use constant, linear or cosine");
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace hpcrl::optim
