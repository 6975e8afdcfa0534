// Where a GRPO/PPO stage's generation runs relative to its training, and what
// this rank does in it: decided once, from the stage's roles, when the stage is
// built (PolicyStage), as pipeline schedules and RL rounds are. The parts of a
// stage read the plan (in PolicyStageContext); none of them asks its roles again.
#pragma once

#include <string>

#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/config/old_logprobs.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::algo {

enum class GenerationPlacement {
  kColocated,      // the engine runs on the trained model itself: no weight sync
  kResharded,      // a copy in another tp/sp/ep layout on the trainer's own ranks (veRL's hybrid engine):
                   // weights resharded into it before each rollout, samples re-dealt to the training layout
  kDisaggregated,  // ranks of its own (`<policy>.rollout`): the round plan's executor (disaggregated_rl.h)
};

// Where an iteration's old log-probs come from (config/old_logprobs.h: the rule the cost model shares).
using config::OldLogprobs;
using config::minibatches_per_epoch;
using config::old_logprob_source;

// What this rank does in a disaggregated stage: generate, train the policy, help
// the trainer from ranks of its own (a reference, a critic), or score the
// generator's rounds from ranks of its own (a reward model).
enum class StageSide { kGenerator, kTrainer, kHelper, kScorer };

struct PolicyPlan {
  GenerationPlacement placement = GenerationPlacement::kColocated;
  StageSide side = StageSide::kTrainer;
  bool generates = false;        // this rank holds the generator's model (the policy's when colocated)
  bool trains = false;           // this rank holds the policy's model
  bool pipeline_copy = false;    // the generator is pipelined: it samples from a pp = 1 copy refreshed per rollout
  bool serves_reference = false; // this rank is a reference on ranks of its own: it answers log-prob requests
  bool serves_rewards = false;   // this rank is a reward model on ranks of its own: it answers scoring rounds
  OldLogprobs old_logprobs = OldLogprobs::kEngine;
};



// `generator`: the policy itself or its `<policy>.rollout` role; `reference_apart`:
// the stage's reference has ranks of its own; `rewards_apart`: this rank scores
// for a reward model of its own (RewardFunction::serves_apart).
PolicyPlan plan_policy_stage(const config::RlStage& cfg, const Role& policy, const Role& generator,
                             const Role* reference, bool reference_apart, bool rewards_apart);

// What every part of a policy stage (rollout_producer.h, experience_builder.h,
// actor_update.h) reads: the stage's config, its roles, its data, its name and the plan.
struct PolicyStageContext {
  StageEnv& env;
  const config::RlStage& cfg;
  Role& policy;
  Role& generator;             // the policy itself unless generation has a role of its own
  Role* reference;             // null: no reference
  const DataSplits& data;
  std::string name;            // "grpo" or "ppo": the spans' and metrics' prefix
  PolicyPlan plan;
};

// The temperature the stage's log-probs (behaviour, reference, policy) are
// taken at: its rollout temperature, so the ratio and the KL compare the
// distribution responses were sampled from (veRL, TRL); 1 for greedy rollouts.
double sampling_temperature(const config::RlStage& cfg);

}  // namespace hpcrl::algo
