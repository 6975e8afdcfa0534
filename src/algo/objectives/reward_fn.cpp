// Summed stage rewards (see reward_fn.h): text rewards here, model rewards in reward_model.cpp.
#include "hpcrl/algo/objectives/reward_fn.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {

reward::Extractor extractor_of(config::Extractor e) {
  switch (e) {
    case config::Extractor::boxed: return reward::Extractor::kBoxed;
    case config::Extractor::answer_tag: return reward::Extractor::kAnswerTag;
    case config::Extractor::answer_is: return reward::Extractor::kAnswerIs;
    case config::Extractor::hash: return reward::Extractor::kHash;
    case config::Extractor::last_number: return reward::Extractor::kLastNumber;
  }
  return reward::Extractor::kBoxed;
}

}  // namespace

reward::VerifiableRewardConfig verifiable_config(const config::RewardConfig& rc) {
  reward::VerifiableRewardConfig vc;
  vc.extract.clear();
  for (auto e : rc.extract) vc.extract.push_back(extractor_of(e));
  vc.format_bonus = rc.format_bonus;
  return vc;
}

RewardFunction::RewardFunction(const config::PipelineConfig& pipeline, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    const config::RewardConfig& rc = *pipeline.find_reward(n);
    HPCRL_CHECK_INPUT(rc.type != config::RewardType::model,
                      pipeline.pos("rewards." + n).str() << ": rewards." << n << ": a type: model reward scores "
                      "token ids with a model role and runs only inside a grpo or ppo stage; use type: verifiable "
                      "or type: command here");
    add_text_reward(pipeline, n);
  }
  set_verifier();
}

RewardFunction::RewardFunction(StageEnv& env, const std::vector<std::string>& names, const Role& generator,
                               int64_t micro_batch, const std::string& stage_name) {
  for (const auto& n : names) {
    if (env.pipeline->find_reward(n)->type == config::RewardType::model)
      models_.emplace_back(env, n, generator, micro_batch, stage_name);
    else
      add_text_reward(*env.pipeline, n);
  }
  set_verifier();
}

void RewardFunction::add_text_reward(const config::PipelineConfig& pipeline, const std::string& name) {
  const config::RewardConfig& rc = *pipeline.find_reward(name);
  switch (rc.type) {
    case config::RewardType::command:
      command_.emplace_back(reward::CommandRewardConfig{rc.name, rc.command, rc.timeout_s});
      command_pos_.push_back(pipeline.pos("rewards." + name).str());
      return;
    case config::RewardType::environment:
      ++environment_;
      return;
    case config::RewardType::verifiable:
      verifiable_.emplace_back(verifiable_config(rc));
      return;
    case config::RewardType::model:  // a stage's RewardModel (the constructors)
      break;
  }
  throw InputError("rewards." + name + ": a type: model reward scores with a model role, not text");
}

void RewardFunction::set_verifier() {
  verifier_ = std::make_unique<reward::VerifiableReward>(verifiable_.empty() ? reward::VerifiableRewardConfig{}
                                                                               : verifiable_.front().config());
}

std::vector<ScoredResponse> RewardFunction::score_batch(const std::vector<reward::RewardSample>& samples,
                                                        const std::vector<SampleIds>& ids) {
  HPCRL_CHECK(models_.empty() || ids.size() == samples.size(),
              "model rewards need the token ids of every sample (" << ids.size() << " for " << samples.size() << ")");
  std::vector<ScoredResponse> out(samples.size());
  for (size_t k = 0; k < samples.size(); ++k)
    for (size_t i = 0; i < verifiable_.size(); ++i) {
      auto r = verifiable_[i].score(std::string(samples[k].response), std::string(samples[k].answer));
      out[k].score += r.score;
      if (i == 0) out[k].correct = r.correct;
    }
  for (size_t i = 0; i < command_.size(); ++i) {
    std::vector<double> scores;
    try {
      scores = command_[i].score(samples);
    } catch (const InputError& e) {
      throw InputError(command_pos_[i] + ": " + e.what());
    } catch (const RuntimeError& e) {
      throw RuntimeError(command_pos_[i] + ": " + e.what());
    }
    for (size_t k = 0; k < samples.size(); ++k) out[k].score += scores[k];
  }
  for (auto& rm : models_) {
    const std::vector<double> scores = rm.score(ids);
    for (size_t k = 0; k < samples.size(); ++k) out[k].score += scores[k];
  }
  for (size_t k = 0; k < samples.size(); ++k) out[k].score += double(environment_) * samples[k].environment;
  return out;
}

void RewardFunction::end_iteration() {
  for (auto& rm : models_) rm.end_iteration();
}

void RewardFunction::serve_iteration() {
  for (auto& rm : models_) rm.serve_iteration();
}

bool RewardFunction::serves_apart() const {
  for (const auto& rm : models_)
    if (rm.apart() && rm.member()) return true;
  return false;
}

ScoredResponse RewardFunction::score(const std::string& prompt, const std::string& response,
                                     const std::string& answer) {
  return score_batch({reward::RewardSample{prompt, response, answer}}).front();
}

}  // namespace hpcrl::algo
