// Where a GRPO/PPO stage's old log-probs come from (old_logprobs.h).
#include "hpcrl/config/old_logprobs.h"

#include <algorithm>

namespace hpcrl::config {

int64_t minibatches_per_epoch(const RlStage& cfg) {
  const int64_t total = cfg.responses();
  const int64_t mini = cfg.mini_batch > 0 ? cfg.mini_batch : total;
  return std::max<int64_t>(1, total / mini);
}

OldLogprobs old_logprob_source(const RlStage& cfg) {
  if (!cfg.recompute_old_logprobs) return OldLogprobs::kEngine;
  const bool one_step = cfg.epochs == 1 && minibatches_per_epoch(cfg) == 1;
  const bool read_before_update = !cfg.reference.empty() && cfg.kl.in_reward && cfg.kl.coef != 0.0;
  return one_step && !read_before_update ? OldLogprobs::kUpdateForward : OldLogprobs::kPass;
}

}  // namespace hpcrl::config
