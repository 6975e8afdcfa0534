// Summed stage rewards (see reward_fn.h).
#include "hpcrl/algo/reward_fn.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

reward::VerifiableRewardConfig verifiable_config(const config::RewardConfig& rc) {
  reward::VerifiableRewardConfig vc;
  vc.extract.clear();
  for (auto e : rc.extract) vc.extract.push_back(static_cast<reward::Extractor>(static_cast<int>(e)));
  vc.format_bonus = rc.format_bonus;
  return vc;
}

RewardFunction::RewardFunction(const config::PipelineConfig& pipeline, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    const config::RewardConfig& rc = *pipeline.find_reward(n);
    HPCRL_CHECK_INPUT(rc.type == config::RewardType::verifiable,
                      pipeline.pos("rewards." + n).str() << ": rewards." << n << ": type '"
                      << config::to_string(rc.type) << "' rewards are not available in this build; use type: verifiable");
    verifiable_.emplace_back(verifiable_config(rc));
  }
  verifier_ = std::make_unique<reward::VerifiableReward>(verifiable_.empty() ? reward::VerifiableRewardConfig{}
                                                                               : verifiable_.front().config());
}

ScoredResponse RewardFunction::score(const std::string&, const std::string& response, const std::string& answer) const {
  ScoredResponse out;
  for (size_t i = 0; i < verifiable_.size(); ++i) {
    auto r = verifiable_[i].score(response, answer);
    out.score += r.score;
    if (i == 0) out.correct = r.correct;
  }
  return out;
}

}  // namespace hpcrl::algo
