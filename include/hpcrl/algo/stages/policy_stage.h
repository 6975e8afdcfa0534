// The policy's side of a GRPO or PPO stage, as one object per stage run
// (PolicyStage), which is what the two share. Its placement is decided once,
// in the constructor (policy_plan.h), and its work is done by three parts:
// RolloutProducer (generation and rewards, on the generator's ranks),
// ExperienceBuilder (old, behaviour and reference log-probs, on the policy's)
// and ActorUpdate (the policy loss's optimizer steps). PolicyStage itself holds
// what they share (data sampler, prompts, rewards) and the stage-wide work:
// resume, checkpoints, evaluation, metrics and the colocated iteration's
// collect(). grpo_stage.cpp and ppo_stage.cpp add only their advantage
// estimator (group-relative; GAE with a critic).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hpcrl/algo/checkpoint/train_checkpoint.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/algo/stages/actor_update.h"
#include "hpcrl/algo/stages/experience_builder.h"
#include "hpcrl/algo/stages/policy_plan.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/stages/rollout_producer.h"
#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/io/dataset_cursor.h"

namespace hpcrl::algo {

class SampleChannel;

class PolicyStage {
 public:
  // `generator`: the role generation runs on when it is not the policy itself
  // (`<policy>.rollout`: on ranks of its own or in another layout; null: the policy generates).
  PolicyStage(StageEnv& env, const config::RlStage& cfg, Role& policy, Role* reference, const DataSplits& data,
              std::string stage_name, Role* generator = nullptr);
  ~PolicyStage();

  const PolicyPlan& plan() const { return context_.plan; }
  Role& policy() { return context_.policy; }
  Role& generator() { return context_.generator; }
  const std::string& name() const { return context_.name; }
  const config::RlStage& config() const { return context_.cfg; }
  io::DataSampler& sampler() { return *sampler_; }
  RolloutProducer& producer() { return producer_; }
  ExperienceBuilder& experience() { return experience_; }
  ActorUpdate& actor() { return actor_; }
  // On the ranks of a reward model of its own: answers one iteration's scoring rounds.
  void serve_rewards();

  // Loads the checkpoint env.resume_from (if any); returns the iteration to start at
  // (`eval_owed`, when given: whether its evaluation is still to be done).
  int64_t resume(const std::vector<TrainedRole>& saved, bool* eval_owed = nullptr);
  void checkpoint(int64_t iteration, const std::vector<TrainedRole>& saved, bool eval_owed = false);
  // Colocated or resharded (every rank generates and trains): rollout + rewards
  // (+ dynamic sampling), re-dealt to the training layout when resharded, then
  // old and reference log-probs.
  Experience collect(int64_t iteration, RlMetrics& m);

  void evaluate(int64_t step, StageResult& result);
  // The stage's iteration loop from `start`.
  StageLoop stage_loop(int64_t start, bool eval_owed) const;
  void write_metrics(int64_t step, const RlMetrics& m, double lr);

 private:
  RewardFunction rewards_;
  PolicyStageContext context_;
  InsideStops eval_stops_;
  // A stage with tools: one set for its rollouts, evaluations and prompts (null without).
  std::unique_ptr<tools::StageToolkit> tools_;
  std::unique_ptr<PromptBuilder> prompts_;
  std::unique_ptr<io::DataSampler> sampler_;
  RolloutProducer producer_;
  ExperienceBuilder experience_;
  ActorUpdate actor_;
  std::unique_ptr<SampleChannel> redeal_;  // kResharded: samples from the generation layout to the training one
};

// The clipped-surrogate settings of a GRPO or PPO stage (KL as a loss term
// unless the stage folds it into the reward).
PolicyLossConfig policy_loss_config(const config::RlStage& cfg);

}  // namespace hpcrl::algo
