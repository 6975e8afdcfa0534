// The reward of an RL stage: the sum of the configured rewards (YAML `reward:
// name` or a list of names) for one response. Verifiable rewards run in
// process; `command` rewards stream to a user program (reward/command_reward.h
// once available); `model` rewards score with a value-head role.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hpcrl/config/pipeline_config.h"
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

  ScoredResponse score(const std::string& prompt, const std::string& response, const std::string& answer) const;

  // The verifier used for accuracy (the first verifiable reward, default extractors otherwise).
  const reward::VerifiableReward& verifier() const { return *verifier_; }

 private:
  std::vector<reward::VerifiableReward> verifiable_;
  std::unique_ptr<reward::VerifiableReward> verifier_;
};

// The verifiable-reward settings of a config entry.
reward::VerifiableRewardConfig verifiable_config(const config::RewardConfig& rc);

}  // namespace hpcrl::algo
