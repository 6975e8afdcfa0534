// The reward of an RL stage: the sum of the configured rewards (YAML `reward:
// name` or a list of names) for one response. Verifiable rewards run in
// process; `command` rewards stream to a user program (reward/command_reward.h),
// started on this rank the first time it scores; `model` rewards (a value-head
// role) are not available in this build and are refused when the stage starts.
#pragma once

#include <memory>
#include <string>
#include <vector>

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
  // InputError for reward types this build cannot run, naming the reward.
  RewardFunction(const config::PipelineConfig& pipeline, const std::vector<std::string>& names);

  // All samples of a rollout round at once: each command program gets the
  // whole batch streamed (one start, no round trip per sample). Errors from a
  // command reward are prefixed with the reward's file:line:col.
  std::vector<ScoredResponse> score_batch(const std::vector<reward::RewardSample>& samples);
  ScoredResponse score(const std::string& prompt, const std::string& response, const std::string& answer);

  // The verifier used for accuracy (the first verifiable reward, default extractors otherwise).
  const reward::VerifiableReward& verifier() const { return *verifier_; }

 private:
  std::vector<reward::VerifiableReward> verifiable_;
  std::vector<reward::CommandReward> command_;
  std::vector<std::string> command_pos_;  // "file:line:col" of each command reward
  std::unique_ptr<reward::VerifiableReward> verifier_;
};

// The verifiable-reward settings of a config entry.
reward::VerifiableRewardConfig verifiable_config(const config::RewardConfig& rc);

}  // namespace hpcrl::algo
