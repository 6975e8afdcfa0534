// The advantages of a grpo stage, by its estimator (config::AdvantageEstimator):
// without a critic, the baseline of a sample is its group's other rewards
// (grpo, rloo) or nothing but the batch's own statistics (reinforce_pp,
// reinforce_pp_baseline). docs/config.md "RL objectives" states the formulas.
#pragma once

#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::algo {

// Sets exp.advantages [B, T] from exp.scores (and, with kl.in_reward, the KL of
// exp.old_logp to exp.ref_logp). Precondition: every rank of the policy's dp
// group calls it for the same iteration — std_norm: batch normalises over the
// global batch, a sum over that group, so that dp = 2 gives the advantages of dp = 1.
void critic_free_advantages(const config::GrpoStage& cfg, KlEstimator kl_estimator, const Role& policy,
                            Experience& exp);

}  // namespace hpcrl::algo
