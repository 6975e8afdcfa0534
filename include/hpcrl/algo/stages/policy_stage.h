// The policy's side of a GRPO or PPO stage, as one object per stage run
// (PolicyStage), which is what the two share:
// drawing prompts, collecting experience (rollout, scoring with DAPO's overlong
// penalty and dynamic sampling, behaviour and reference log-probs), the
// clipped-surrogate actor update over mini-batches with globally normalised
// losses, metrics, evaluation, checkpoints and resume. grpo_stage.cpp and
// ppo_stage.cpp add only their advantage estimator (group-relative; GAE with a
// critic). Defined in policy_stage.cpp (set-up, metrics, evaluation,
// checkpoints), experience.cpp (collect) and actor_update.cpp (update).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/stages/stage_env.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/algo/checkpoint/train_checkpoint.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/weight_sync.h"

namespace hpcrl::algo {

class SampleChannel;
class RemoteReference;

struct RlMetrics {
  double reward_mean = 0, reward_std = 0, accuracy = 0;
  double response_len_mean = 0, response_len_max = 0;
  double clip_frac = 0, kl = 0, entropy = 0, grad_norm = 0, loss = 0;
  double kept_groups = 0;       // after dynamic sampling
  double sampling_rounds = 0;
  double tokens = 0;            // prompt + response tokens processed this iteration
  double seconds = 0;
  std::vector<std::pair<std::string, double>> seconds_by_span;
  std::vector<std::pair<std::string, double>> extra;  // stage-specific (critic loss, values, ...)
};

// The sampled responses of some prompts, before they become an Experience.
struct RolloutSamples {
  std::vector<std::vector<int32_t>> prompt_ids, response_ids;
  std::vector<std::vector<float>> logprobs;  // behaviour log-probs from the engine
  std::vector<size_t> example;               // dataset index of each sample's prompt
  std::vector<double> scores;
  std::vector<bool> truncated;
  void append(const RolloutSamples& o, size_t first, size_t count);  // samples [first, first+count) of o
  size_t size() const { return scores.size(); }
};

// What every rollout of an iteration adds up on a rank (before dynamic-sampling
// filtering), summed over the policy's dp group for the iteration's metrics.
struct RolloutSums {
  double score = 0;            // Σ reward
  double score_squared = 0;    // Σ reward²
  double samples = 0;
  double correct = 0;          // samples the verifier judged correct
  double response_tokens = 0;
  double tokens = 0;           // prompt + response tokens
};

// One iteration's generation as the generating ranks hand it on: the kept
// samples of this rank's prompts and the totals over every generating replica
// (the same on each), which the iteration's reward and length metrics come from.
struct RolloutRound {
  RolloutSamples kept;
  RolloutSums totals;             // over every sample drawn, before dynamic-sampling filtering
  double max_response_len = 0;    // over every generating replica
  double kept_groups = 0, rounds = 0;
  std::vector<std::pair<std::string, double>> seconds_by_span;  // rollout, reward
};

// What the actor's mini-batch steps of one iteration add up on a rank, summed
// over the policy's ranks after the last (sum_step_sums).
struct ActorUpdateSums {
  double clipped_tokens = 0;  // Σ clip fraction · tokens, per micro-batch
  double kl_tokens = 0;       // Σ KL · tokens
  double entropy_tokens = 0;  // Σ entropy · tokens
  double tokens = 0;
  double loss = 0;            // Σ micro-batch loss numerators / den
};

class PolicyStage {
 public:
  // `generator`: the role generation runs on when it is not the policy itself
  // (`<policy>.rollout` on ranks of its own; null: the policy generates).
  PolicyStage(StageEnv& env, const config::RlStage& cfg, Role& policy, Role* reference, const DataSplits& data,
              std::string stage_name, Role* generator = nullptr);
  ~PolicyStage();

  // This rank generates (holds the engine's model) / trains the policy.
  bool generates() const { return generator_.member(); }
  bool trains() const { return policy_.member(); }
  // Generation has ranks of its own (`<policy>.rollout`), apart from the trainer's.
  bool disaggregated() const { return generator_.mesh.first_rank() != policy_.mesh.first_rank(); }
  // Generation runs on a copy in another layout on the trainer's own ranks (veRL's
  // hybrid engine): the weights are resharded into it before each rollout.
  bool resharded() const { return &generator_ != &policy_ && !disaggregated(); }
  Role& policy() { return policy_; }
  Role& generator() { return generator_; }
  const std::string& name() const { return name_; }
  const config::RlStage& config() const { return cfg_; }
  // On the ranks of a reference of its own: answers one update's log-prob requests.
  void serve_reference();
  bool scores_reference() const { return remote_reference_ && reference_->member(); }
  // On the ranks of a reward model of its own: answers one iteration's scoring rounds.
  void serve_rewards();
  bool scores_rewards() const { return rewards_.serves_apart(); }
  io::DataSampler& sampler() { return *sampler_; }

  int64_t minibatches_per_epoch() const;
  // Loads the checkpoint env.resume_from (if any); returns the iteration to start at
  // (`eval_owed`, when given: whether its evaluation is still to be done).
  int64_t resume(const std::vector<TrainedRole>& saved, bool* eval_owed = nullptr);
  void checkpoint(int64_t iteration, const std::vector<TrainedRole>& saved, bool eval_owed = false);

  // Rollout + rewards (+ dynamic sampling) + old and reference log-probs.
  Experience collect(int64_t iteration, RlMetrics& m);
  // The generating half of collect(): rollouts and rewards on the generator's ranks.
  RolloutRound produce(int64_t iteration);
  // The training half: kept samples as a batch with old (and behaviour) and reference log-probs,
  // and the train/inference mismatch when measured. `staleness`: weight updates the trainer has
  // made since the engine sampled them (no mismatch is measured on stale samples).
  Experience experience_of(RolloutSamples& kept, int64_t iteration, int64_t staleness, RlMetrics& m);
  // Clipped-surrogate updates: cfg.epochs passes over minibatches_per_epoch() mini-batches.
  void update(const Experience& exp, Trainer& trainer, const PolicyLossConfig& pl, int64_t iteration,
              RlMetrics& m);

  void evaluate(int64_t step, StageResult& result);
  // The stage's iteration loop from `start`, evaluating into `result` and
  // checkpointing `saved` (both must outlive it); the caller sets .step.
  StageLoop stage_loop(int64_t start, bool eval_owed, const std::vector<TrainedRole>& saved, StageResult& result);
  void write_metrics(int64_t step, const RlMetrics& m, double lr);

  const PromptBuilder& prompts() const { return *prompts_; }

 private:
  // Rounds of rollouts until enough groups are kept (one round without dynamic
  // sampling); every sample drawn adds to `sums` and `max_response_len`.
  RolloutSamples draw_groups(int64_t iteration, RlMetrics& m, RolloutSums& sums, double& max_response_len,
                             double& kept_groups);
  // `cfg.group` samples of each prompt of `p_ids` (round `round` of the iteration).
  std::vector<rollout::Sample> generate(const std::vector<std::vector<int32_t>>& p_ids, int64_t iteration,
                                        int64_t round, RlMetrics& m);
  // The rewards of `samples` (prompts `rows`), with the overlong penalty.
  RolloutSamples score(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                       const std::vector<rollout::Sample>& samples, int64_t iteration, RlMetrics& m,
                       RolloutSums& sums, double& max_response_len);
  // importance-weight and behaviour-vs-old KL metrics of a decoupled experience.
  void add_offpolicy_metrics(const Experience& e, RlMetrics& m);
  // Whether iteration `iteration` measures the train/inference mismatch (logprob_mismatch.h):
  // every iteration with an old-log-prob pass, else every logprob_mismatch_every-th; never on stale samples.
  bool measures_mismatch(int64_t iteration, int64_t staleness) const;
  // The mismatch metrics of the batch's response tokens, reduced over the policy's dp group.
  void add_mismatch_metrics(const at::Tensor& trainer_logp, const at::Tensor& engine_logp, const TokenBatch& batch,
                            RlMetrics& m);
  // One optimizer step of the actor on experience rows [lo, hi); adds to `sums`.
  double actor_step(const Experience& exp, const at::Tensor& mask, int64_t lo, int64_t hi, Trainer& trainer,
                    const PolicyLossConfig& pl, int64_t step, ActorUpdateSums& sums);
  // Runs `fn` inside the span "<stage>/<phase>" and adds its seconds to m's seconds/<phase>.
  void timed(const std::string& phase, RlMetrics& m, const std::function<void()>& fn);

  StageEnv& env_;
  const config::RlStage& cfg_;
  Role& policy_;
  Role& generator_;
  Role* reference_;
  const DataSplits& data_;
  std::string name_;
  RewardFunction rewards_;
  std::unique_ptr<PromptBuilder> prompts_;
  std::unique_ptr<io::DataSampler> sampler_;
  std::unique_ptr<rollout::Engine> engine_;
  std::unique_ptr<SampleChannel> redeal_;  // resharded(): samples from the generation layout to the training one
  rollout::ReleasedWeights released_;      // resharded(): the generation copy's storage between rollouts
  std::unique_ptr<RemoteReference> remote_reference_;  // a reference on ranks of its own
  InsideStops generation_stops_;  // rollouts may be abandoned part-way (colocated: every rank generates)
  InsideStops eval_stops_;
  io::DataCursor iteration_start_;  // the data position when the current iteration began (rewind)
};

// The iteration's reward, accuracy and length metrics from its rollout totals.
void add_rollout_metrics(const RolloutRound& round, RlMetrics& m);

// The temperature the stage's log-probs (behaviour, reference, policy) are
// taken at: its rollout temperature, so the ratio and the KL compare the
// distribution responses were sampled from (veRL, TRL); 1 for greedy rollouts.
double sampling_temperature(const config::RlStage& cfg);

// The clipped-surrogate settings of a GRPO or PPO stage (KL as a loss term
// unless the stage folds it into the reward).
PolicyLossConfig policy_loss_config(const config::RlStage& cfg);

}  // namespace hpcrl::algo
