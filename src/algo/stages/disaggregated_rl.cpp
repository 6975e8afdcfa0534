// The executor of a disaggregated RL stage's round plan (disaggregated_rl.h).
#include "hpcrl/algo/stages/disaggregated_rl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "hpcrl/algo/stages/rl_rounds.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/algo/training/token_staleness.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/bridge.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/weight_sync.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/progress.h"

namespace hpcrl::algo {

namespace {
std::vector<int> ranks_of(const dist::Mesh& mesh) {
  std::vector<int> r(size_t(mesh.size()));
  std::iota(r.begin(), r.end(), mesh.first_rank());
  return r;
}

// What one rank of the stage carries from action to action.
struct RoundState {
  int64_t version = 0;                      // weight updates this rank's policy copy has
  std::map<int64_t, SampleMessage> inbox;   // trainer: received, not yet trained on
  io::DataCursor consumed;                  // trainer: data position after the last trained iteration
  RolloutRound produced;                    // generator: the round generated, not yet sent
  double waited_weights = 0;                // generator: seconds in syncs since its last send
  double waited_samples = 0, synced = 0;    // trainer: seconds receiving / sending weights since its last update
  double sync_bytes = 0;
  double last_update_us = 0;
  bool target_reached = false;              // trainer: an evaluation met stop_at_accuracy
};
}  // namespace

class DisaggregatedRun {
 public:
  DisaggregatedRun(StageEnv& env, PolicyStage& stage, PolicyTraining& training);
  StageResult run();

 private:
  // Weights to the generator and the collective stop check; true: the stage ends here.
  bool sync_weights();
  void generate(int64_t it) { state_.produced = stage_.producer().produce(it, state_.version); }
  void send(int64_t it);
  void receive(int64_t it);
  void update(int64_t it);
  void help(int64_t it);
  void evaluate_and_checkpoint(int64_t done);
  void checkpoint(int64_t step);

  StageEnv& env_;
  PolicyStage& stage_;
  PolicyTraining& training_;
  const config::RlStage& cfg_;
  StageSide side_;  // what this rank does (policy_plan.h)
  dist::Bridge bridge_;        // the trainer's first rank → every generating rank
  dist::CommPtr saving_;       // the ranks of the roles a checkpoint holds (the trainer's, a critic's own)
  SampleChannel channel_;
  StageEnv saving_env_;        // env with saving_ as its world
  RoundState state_;
  StageResult result_;
  std::unique_ptr<Progress> progress_;
};

// World ranks of every role a checkpoint holds, in order (known on every rank).
std::vector<int> saving_ranks(const std::vector<TrainedRole>& saved) {
  std::vector<int> out;
  for (const auto& tr : saved)
    for (int r : ranks_of(tr.role->mesh))
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

DisaggregatedRun::DisaggregatedRun(StageEnv& env, PolicyStage& stage, PolicyTraining& training)
    : env_(env),
      stage_(stage),
      training_(training),
      cfg_(stage.config()),
      side_(stage.plan().side),
      bridge_(dist::Bridge::create(stage.policy().mesh.first_rank(),
                                   {stage.generator().mesh.first_rank(), stage.generator().mesh.last_rank()},
                                   stage.name() + "/weights")),
      saving_(dist::new_group(saving_ranks(training.saved()), stage.name() + "/trainer")),
      channel_(stage.generator(), stage.policy(), dist::new_group(all_ranks(env.world->size()), stage.name() + "/samples"),
               cfg_.group),
      saving_env_(env) {
  saving_env_.world = saving_;
}

StageResult DisaggregatedRun::run() {
  // Ranks outside every saved role read only the step and the data cursor.
  const int64_t start = resume_stage(saving_env_, saving_ ? training_.saved() : std::vector<TrainedRole>{},
                                     stage_.sampler(), stage_.name());
  state_.version = start;
  state_.consumed = stage_.sampler().cursor();
  state_.last_update_us = trace::now_us();
  progress_ = std::make_unique<Progress>(stage_.name(), cfg_.iterations, env_.progress && env_.world->rank() == 0,
                                         "iter");
  if (side_ == StageSide::kTrainer && start == 0 && env_.pipeline->run.eval_before_train) stage_.evaluate(0, result_);
  // Partial rollouts generate one version ahead; the rest of max_staleness is room for responses to cross updates.
  const RoundPlan plan = plan_rounds(start, cfg_.iterations, cfg_.async.partial_rollouts ? 1 : cfg_.async.max_staleness);
  if (env_.world->rank() == 0)
    spdlog::info("{}: generation on ranks {}-{}, training on {}-{}, max_staleness {}; trainer rounds: {}",
                 stage_.name(), stage_.generator().mesh.first_rank(), stage_.generator().mesh.last_rank(),
                 stage_.policy().mesh.first_rank(), stage_.policy().mesh.last_rank(), cfg_.async.max_staleness,
                 describe(plan.training));
  result_.steps_done = start;
  // Helpers follow the trainer's rounds: its syncs, and their answers at each update; a reward model the generator's.
  trace::TimedSpan rounds(stage_.name() + "/rounds", {{"generates", side_ == StageSide::kGenerator ? 1.0 : 0.0},
                                                      {"scores", side_ == StageSide::kHelper ? 1.0 : 0.0},
                                                      {"rewards", side_ == StageSide::kScorer ? 1.0 : 0.0}});
  const bool follows_generation = side_ == StageSide::kGenerator || side_ == StageSide::kScorer;
  for (const RoundAction& a : follows_generation ? plan.generation : plan.training) {
    switch (a.step) {
      case RoundStep::kSyncWeights:
        if (sync_weights()) return result_;
        break;
      case RoundStep::kGenerate:
        if (side_ == StageSide::kGenerator) generate(a.iteration);
        else stage_.serve_rewards();
        break;
      case RoundStep::kSendSamples:
        if (side_ == StageSide::kGenerator) send(a.iteration);
        break;
      case RoundStep::kReceiveSamples:
        if (side_ == StageSide::kTrainer) receive(a.iteration);
        break;
      case RoundStep::kUpdate:
        if (side_ == StageSide::kTrainer) update(a.iteration);
        else help(a.iteration);
        break;
    }
  }
  channel_.wait_sends();
  progress_->finish();
  result_.steps_done = cfg_.iterations;
  if (side_ == StageSide::kTrainer) stage_.evaluate(cfg_.iterations, result_);
  if (saving_) checkpoint(cfg_.iterations);
  return result_;
}

bool DisaggregatedRun::sync_weights() {
  torch::NoGradGuard no_grad;
  const bool trainer = side_ == StageSide::kTrainer;
  {
    trace::TimedSpan span(stage_.name() + (trainer ? "/weight_sync" : "/wait_weights"));
    channel_.wait_sends();  // the generator's sends complete once the trainer receives them: part of its wait
    io::NamedTensors full;
    if (trainer) full = model::gather_full_weights(*stage_.policy().model);  // collective over the trainer's groups
    if (bridge_.is_member()) {
      at::Tensor version = at::full({1}, state_.version, at::kLong);
      bridge_.broadcast(version);
      state_.version = version.item<int64_t>();
      const auto stats = rollout::broadcast_weights(*bridge_.comm(), 0, trainer ? &full : nullptr,
                                                    trainer ? nullptr : stage_.generator().model.get());
      if (trainer) state_.sync_bytes += double(stats.bytes);
    }
    (trainer ? state_.synced : state_.waited_weights) += span.elapsed_seconds();
  }
  // The stop check: a signal on any rank, or the trainer's early stop.
  const bool stop = env_.should_stop && env_.should_stop();
  at::Tensor target = at::full({1}, state_.target_reached ? 1 : 0, at::kInt);
  env_.world->all_reduce(target, dist::ReduceOp::kMax);
  if (!stop && target.item<int>() == 0) return false;
  channel_.wait_sends();
  progress_->finish();
  result_.stopped = stop;
  if (saving_) checkpoint(state_.version);
  return true;
}

void DisaggregatedRun::send(int64_t it) {
  SampleMessage msg;
  msg.iteration = it;
  msg.version = state_.version;
  msg.cursor = stage_.sampler().cursor();
  msg.round = std::move(state_.produced);
  msg.wait_weights_seconds = state_.waited_weights;
  state_.waited_weights = 0;
  channel_.send(msg);
}

void DisaggregatedRun::receive(int64_t it) {
  trace::TimedSpan span(stage_.name() + "/wait_samples", {{"step", double(it)}});
  state_.inbox.emplace(it, channel_.receive(it));
  state_.waited_samples += span.elapsed_seconds();
}

void DisaggregatedRun::update(int64_t it) {
  trace::TimedSpan span(stage_.name() + "/iteration", {{"step", double(it)}});
  SampleMessage msg = std::move(state_.inbox.at(it));
  state_.inbox.erase(it);
  RlMetrics m;
  // A token sampled with weights v is trained now, at version `state_.version`, with staleness version - v.
  const int64_t k = cfg_.async.max_staleness;
  const double dropped = double(drop_stale_groups(msg.round.kept, cfg_.group, state_.version, k));  // never planned
  at::Tensor counts = at::tensor(staleness_counts(msg.round.kept, state_.version, k), at::kDouble);
  counts = sum_over_dp(stage_.policy(), counts);
  const std::vector<double> summed(counts.data_ptr<double>(), counts.data_ptr<double>() + counts.numel());
  add_rollout_metrics(msg.round, m);
  m.seconds_by_span.emplace_back("wait_samples", state_.waited_samples);
  m.seconds_by_span.emplace_back("weight_sync", state_.synced);
  m.seconds_by_span.emplace_back("wait_weights", msg.wait_weights_seconds);
  add_staleness_metrics(summed, m);
  const int64_t staleness = max_token_staleness(summed);
  Experience exp = stage_.experience().make(msg.round.kept, it, staleness, m);
  training_.train(exp, m, it);
  state_.version = it + 1;
  state_.consumed = msg.cursor;
  m.extra.emplace_back("staleness/dropped_samples", sum_over_dp(stage_.policy(), dropped) + msg.round.dropped_stale);
  m.extra.emplace_back("weight_sync/bytes", state_.sync_bytes);
  const double now = trace::now_us();
  m.seconds = (now - state_.last_update_us) * 1e-6;  // since the previous update ended: the trainer's iteration
  state_.waited_samples = state_.synced = state_.sync_bytes = 0;
  state_.last_update_us = now;
  stage_.write_metrics(it + 1, m, training_.lr(it));
  progress_->update(it + 1, fmt::format("reward {:.3f}, staleness {}", m.reward_mean, staleness));
  result_.steps_done = it + 1;
  evaluate_and_checkpoint(it + 1);
}

void DisaggregatedRun::help(int64_t it) {
  if (stage_.plan().serves_reference) stage_.experience().serve_reference();  // first: the trainer asks while collecting
  training_.serve(it);
  state_.version = it + 1;
  result_.steps_done = it + 1;
  evaluate_and_checkpoint(it + 1);
}

void DisaggregatedRun::evaluate_and_checkpoint(int64_t done) {
  if (done == cfg_.iterations) return;  // the final evaluation and checkpoint follow the plan
  if (side_ == StageSide::kTrainer && cfg_.eval_every > 0 && done % cfg_.eval_every == 0) {
    stage_.evaluate(done, result_);
    state_.target_reached = cfg_.stop_at_accuracy > 0 && result_.eval_accuracy >= cfg_.stop_at_accuracy;
  }
  if (saving_ && env_.checkpoint_every > 0 && done % env_.checkpoint_every == 0) checkpoint(done);
}

void DisaggregatedRun::checkpoint(int64_t step) {
  // The data position of the last trained iteration: later draws are regenerated on resume.
  stage_.sampler().restore(state_.consumed, "the trainer's data position");
  checkpoint_stage(saving_env_, step, training_.saved(), stage_.sampler(), stage_.name());
}

StageResult run_disaggregated(StageEnv& env, PolicyStage& stage, PolicyTraining& training) {
  return DisaggregatedRun(env, stage, training).run();
}

}  // namespace hpcrl::algo
