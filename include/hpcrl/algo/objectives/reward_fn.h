// The reward of an RL stage: the sum of the configured rewards (YAML `reward:
// name` or a list of names) for one response. Verifiable rewards run in
// process on the decoded text; `command` rewards stream to a user program
// (reward/command_reward.h), started on this rank the first time it scores;
// `model` rewards run a value-head role on the policy's token ids and take its
// value at the last token (algo/objectives/reward_model.h). Only a stage, which has the
// roles, can build a function with model rewards; its layout and vocabulary
// checks run when the stage starts. docs/rewards.md has the user's side.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hpcrl/algo/objectives/reward_model.h"
#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/reward/command_reward.h"
#include "hpcrl/reward/verifiable.h"

namespace hpcrl::algo {

struct ScoredResponse {
  double score = 0;     // summed reward
  bool correct = false; // the first verifiable reward judged the answer correct
};

class RewardFunction {
 public:
  // Text rewards only (verifiable, command): InputError naming a `model`
  // reward, which needs a stage's roles. An `environment` reward adds what the
  // trajectory's environment tool answered with (RewardSample::environment).
  RewardFunction(const config::PipelineConfig& pipeline, const std::vector<std::string>& names);
  // The rewards of stage `stage_name` whose samples `generator` generates;
  // model rewards score in micro-batches of `micro_batch` rows (0 = all at
  // once). Collective over env.world when there are model rewards
  // (RewardModel's checks; a model reward on ranks of its own).
  RewardFunction(StageEnv& env, const std::vector<std::string>& names, const Role& generator, int64_t micro_batch,
                 const std::string& stage_name);

  // All samples of a rollout round at once: each command program gets the
  // whole batch streamed (one start, no round trip per sample). Errors from a
  // command reward are prefixed with the reward's file:line:col. `ids` are the
  // samples' token ids (one per sample), which model rewards score; with model
  // rewards this is collective over their tp and sp groups.
  std::vector<ScoredResponse> score_batch(const std::vector<reward::RewardSample>& samples,
                                          const std::vector<SampleIds>& ids = {});
  // One sample by its text: for functions without model rewards (they need ids).
  ScoredResponse score(const std::string& prompt, const std::string& response, const std::string& answer);

  // Model rewards on ranks of their own (algo/objectives/remote_reward.h): on generating
  // ranks, after an iteration's last score_batch(); on a reward model's ranks,
  // answering that iteration's requests. Nothing for rewards beside the generator.
  void end_iteration();
  void serve_iteration();
  // This rank holds a model reward that has ranks of its own.
  bool serves_apart() const;

  // The verifier used for accuracy (the first verifiable reward, default extractors otherwise).
  const reward::VerifiableReward& verifier() const { return *verifier_; }

 private:
  void add_text_reward(const config::PipelineConfig& pipeline, const std::string& name);
  void set_verifier();

  std::vector<reward::VerifiableReward> verifiable_;
  std::vector<reward::CommandReward> command_;
  std::vector<std::string> command_pos_;  // "file:line:col" of each command reward
  std::vector<RewardModel> models_;
  int64_t environment_ = 0;  // type: environment rewards, each the sum its trajectory's environment answered
  std::unique_ptr<reward::VerifiableReward> verifier_;
};

// The verifiable-reward settings of a config entry.
reward::VerifiableRewardConfig verifiable_config(const config::RewardConfig& rc);

}  // namespace hpcrl::algo
