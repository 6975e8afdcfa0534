// Post-hooks on the gradient accumulators of a parameter set: how the dp
// all-reduce (GradSync) and the ZeRO-2 reduce-scatter (GradReduceScatter) learn
// that the backward has finished a parameter's gradient for this micro-batch,
// so its bucket can be sent while the backward goes on. The hooks are removed
// when this object goes; `on_ready` may run on an autograd worker thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "hpcrl/optim/param_set.h"

namespace hpcrl::optim {

class AccumulatorHooks {
 public:
  // Calls on_ready(k) each time AccumulateGrad has stored params[k]'s gradient.
  AccumulatorHooks(const ParamSet& params, std::function<void(size_t)> on_ready);
  ~AccumulatorHooks();
  AccumulatorHooks(const AccumulatorHooks&) = delete;
  AccumulatorHooks& operator=(const AccumulatorHooks&) = delete;

 private:
  std::vector<std::pair<std::shared_ptr<void>, uintptr_t>> hooks_;  // (grad accumulator, hook key)
};

}  // namespace hpcrl::optim
