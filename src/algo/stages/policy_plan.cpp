// A GRPO/PPO stage's placement, decided once (policy_plan.h).
#include "hpcrl/algo/stages/policy_plan.h"

namespace hpcrl::algo {

namespace {
GenerationPlacement placement_of(const Role& policy, const Role& generator) {
  if (generator.mesh.first_rank() != policy.mesh.first_rank()) return GenerationPlacement::kDisaggregated;
  return &generator != &policy ? GenerationPlacement::kResharded : GenerationPlacement::kColocated;
}

StageSide side_of(const PolicyPlan& plan) {
  if (plan.generates) return StageSide::kGenerator;
  if (plan.serves_rewards) return StageSide::kScorer;
  return plan.trains ? StageSide::kTrainer : StageSide::kHelper;
}
}  // namespace

PolicyPlan plan_policy_stage(const config::RlStage& cfg, const Role& policy, const Role& generator,
                             const Role* reference, bool reference_apart, bool rewards_apart) {
  PolicyPlan plan;
  plan.old_logprobs = old_logprob_source(cfg);
  plan.placement = placement_of(policy, generator);
  plan.generates = generator.member();
  plan.trains = policy.member();
  plan.pipeline_copy = generator.ctx.pp_size() > 1;
  plan.serves_reference = reference_apart && reference->member();
  plan.serves_rewards = rewards_apart;
  plan.side = side_of(plan);
  return plan;
}

double sampling_temperature(const config::RlStage& cfg) {
  return cfg.sampling.temperature > 0 ? cfg.sampling.temperature : 1.0;
}

}  // namespace hpcrl::algo
