// PPO with a critic: rollouts and rewards as in GRPO, then per-token values from
// the critic (a value-head role), KL-shaped per-token rewards (score at the last
// token, -kl_coef·kl everywhere when kl.in_reward), GAE(γ, λ) advantages and
// returns, the clipped policy update, and a clipped value-loss critic update.
// critic_warmup iterations train only the critic. Spans: ppo/values,
// ppo/critic_update, plus the shared ppo/rollout, ppo/reward, ppo/actor_update, ...
#pragma once

#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::algo {

StageResult run_ppo(StageEnv& env);

}  // namespace hpcrl::algo
