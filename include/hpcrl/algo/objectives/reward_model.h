// The `model` reward: a role with a value head scores each response, as the
// reward models of OpenRLHF and TRL do (HF *ForSequenceClassification with one
// label: its `score.weight` is hpcrl's value head, so such a checkpoint loads
// as `init: {path: DIR}, head: value`).
//
//   models:  {rm: {init: {path: ckpt/rm}, head: value}}
//   rewards: {rm: {type: model, model: rm}}
//
// The reward of a response is the value-head output at the LAST token of
// prompt + response — the last sampled token, EOS included when the policy
// sampled one. It runs on the policy's token ids as sampled (no decode and
// re-encode), so the reward role must share the policy's tokenizer and
// vocabulary. Rows are right-padded with causal attention, so a score does not
// depend on what else is in its micro-batch.
//
// Layout: beside the generating role (the same ranks: every rank when
// colocated, the generation's own ranks when disaggregated) each rank scores
// its own samples, so its data-parallel size and coordinates must be the
// generator's; tp and sp may differ (sp splits the sequence; the last-token
// values are summed over the sp group). On ranks of its own (disaggregated,
// disjoint from the generation's) it answers the generating ranks' requests
// round by round (algo/objectives/remote_reward.h), in any tp/sp/dp layout.
// A pipelined reward role (pp > 1) scores through the forward-only pipeline
// (algo/training/value_pass.h), whose values every rank of the role receives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/rollout/engine.h"

namespace hpcrl::algo {

// One sample's token ids; the vectors must outlive the call that reads them.
struct SampleIds {
  const std::vector<int32_t>* prompt = nullptr;    // non-empty
  const std::vector<int32_t>* response = nullptr;  // may be empty (then the last prompt token is scored)
};

// The ids of engine samples: prompt_ids[s.prompt_index] + s.tokens for each s.
std::vector<SampleIds> sample_ids(const std::vector<std::vector<int32_t>>& prompt_ids,
                                  const std::vector<rollout::Sample>& samples);

// Value-head output at the last token of each sample, under no_grad, in
// micro-batches of `micro_batch` rows (0 = all at once; rows are grouped by
// length to pad less). Collective over the role's tp, sp and pp groups: their
// ranks pass the same samples. Needs a model with a value head.
std::vector<double> last_token_values(Role& rm, const std::vector<SampleIds>& samples, int64_t micro_batch = 0);

// A `type: model` reward of a stage, checked when the stage starts.
class RemoteRewardModel;

class RewardModel {
 public:
  // InputError naming the reward's file:line:col and the fix, thrown on every
  // rank alike (collective over env.world), when: the role has no value head;
  // it shares only some of the generator's ranks; beside the generator, it
  // misses a generating rank, or its dp size or a rank's dp coordinate differs
  // from the generator's; its vocabulary or tokenizer differs from the
  // policy's.
  // `generator`: the role the stage samples on (the policy, or its generation copy).
  RewardModel(StageEnv& env, const std::string& reward_name, const Role& generator, int64_t micro_batch,
              const std::string& stage_name);
  RewardModel(RewardModel&&) noexcept;
  ~RewardModel();

  // On generating ranks: one score per sample (collective over the reward
  // role's tp and sp groups beside it; a request to its own ranks otherwise).
  std::vector<double> score(const std::vector<SampleIds>& samples);
  // Apart: on generating ranks after an iteration's last score(), and on the
  // reward role's ranks to answer that iteration's requests. Beside: nothing.
  void end_iteration();
  void serve_iteration();
  bool apart() const { return remote_ != nullptr; }
  bool member() const { return role_.member(); }

  const std::string& name() const { return name_; }

 private:
  void check_beside(StageEnv& env, const Role& generator, const std::string& where);
  void check_vocabulary(const Role& generator, const std::string& where);

  std::string name_;
  Role& role_;
  int64_t micro_batch_;
  std::unique_ptr<RemoteRewardModel> remote_;  // the reward role has ranks of its own
};

}  // namespace hpcrl::algo
