// The executor of a disaggregated RL stage's round plan (disaggregated_rl.h).
#include "hpcrl/algo/stages/disaggregated_rl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "hpcrl/algo/stages/in_flight.h"
#include "hpcrl/algo/stages/rl_rounds.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/algo/training/token_staleness.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/bridge.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/weight_sync.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/fs.h"
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
  // Weights to the generator before it generates `iteration`, the collective stop check, and a checkpoint when
  // one is due; true: the stage ends here.
  bool sync_weights(int64_t iteration);
  void generate(int64_t it) { state_.produced = stage_.producer().produce(it, state_.version); }
  void send(int64_t it);
  void receive(int64_t it);
  void update(int64_t it);
  void help(int64_t it);
  void evaluate_and_checkpoint(int64_t done);
  void checkpoint(int64_t step, const CheckpointExtras& extras = {});
  // At the sync before generating `iteration`: the checkpoint with what is in flight (in_flight.h).
  void checkpoint_at_sync(int64_t step, int64_t iteration);
  // Whether the periodic checkpoint after `done` updates waits for the sync that carries that version.
  bool checkpoint_due_at_sync(int64_t done) const;
  InFlightPoint in_flight_point(int64_t iteration) const;
  // The round plan's k: partial rollouts generate one version ahead; the rest of max_staleness is room for
  // responses to cross updates.
  int64_t plan_staleness() const { return cfg_.async.partial_rollouts ? 1 : cfg_.async.max_staleness; }
  // Resumed from a checkpoint written at a sync: the plan from that sync on, with what was in flight there.
  void re_enter(int64_t start);

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
  RoundPlan plan_;
  int64_t start_ = 0;                  // the iteration this process started at
  std::set<int64_t> sync_versions_;    // the weight versions the plan's syncs carry
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
  start_ = resume_stage(saving_env_, saving_ ? training_.saved() : std::vector<TrainedRole>{}, stage_.sampler(),
                        stage_.name());
  state_.version = start_;
  state_.consumed = stage_.sampler().cursor();
  state_.last_update_us = trace::now_us();
  progress_ = std::make_unique<Progress>(stage_.name(), cfg_.iterations, env_.progress && env_.world->rank() == 0,
                                         "iter");
  if (side_ == StageSide::kTrainer && start_ == 0 && env_.pipeline->run.eval_before_train) stage_.evaluate(0, result_);
  plan_ = plan_rounds(start_, cfg_.iterations, plan_staleness());
  if (env_.resume_from) re_enter(start_);
  const auto versions = plan_.sync_versions();
  sync_versions_.insert(versions.begin(), versions.end());
  if (env_.world->rank() == 0)
    spdlog::info("{}: generation on ranks {}-{}, training on {}-{}, max_staleness {}; trainer rounds: {}",
                 stage_.name(), stage_.generator().mesh.first_rank(), stage_.generator().mesh.last_rank(),
                 stage_.policy().mesh.first_rank(), stage_.policy().mesh.last_rank(), cfg_.async.max_staleness,
                 describe(plan_.training));
  result_.steps_done = start_;
  // Helpers follow the trainer's rounds: its syncs, and their answers at each update; a reward model the generator's.
  trace::TimedSpan rounds(stage_.name() + "/rounds", {{"generates", side_ == StageSide::kGenerator ? 1.0 : 0.0},
                                                      {"scores", side_ == StageSide::kHelper ? 1.0 : 0.0},
                                                      {"rewards", side_ == StageSide::kScorer ? 1.0 : 0.0}});
  const bool follows_generation = side_ == StageSide::kGenerator || side_ == StageSide::kScorer;
  for (const RoundAction& a : follows_generation ? plan_.generation : plan_.training) {
    switch (a.step) {
      case RoundStep::kSyncWeights:
        if (sync_weights(a.iteration)) return result_;
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

bool DisaggregatedRun::sync_weights(int64_t iteration) {
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
  const bool ends = stop || target.item<int>() != 0;
  // Every rank knows the version here (the broadcast), so all agree on whether a checkpoint is due.
  if (ends || checkpoint_due_at_sync(state_.version)) checkpoint_at_sync(state_.version, iteration);
  if (!ends) return false;
  progress_->finish();
  result_.stopped = stop;
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
  // Written at the sync that carries version `done` when the plan has one, with what is in flight there.
  if (saving_ && env_.checkpoint_every > 0 && done % env_.checkpoint_every == 0 && !sync_versions_.count(done))
    checkpoint(done);
}

bool DisaggregatedRun::checkpoint_due_at_sync(int64_t done) const {
  return env_.checkpoint_every > 0 && done % env_.checkpoint_every == 0 && done > start_ && done < cfg_.iterations;
}

void DisaggregatedRun::checkpoint(int64_t step, const CheckpointExtras& extras) {
  // The data position of the last trained iteration: without in-flight state, later draws are regenerated on resume.
  stage_.sampler().restore(state_.consumed, "the trainer's data position");
  checkpoint_stage(saving_env_, step, training_.saved(), stage_.sampler(), stage_.name(), false, extras);
}

void DisaggregatedRun::checkpoint_at_sync(int64_t step, int64_t iteration) {
  if (side_ == StageSide::kGenerator) channel_.send_generator_state(encode_generator(stage_.producer().snapshot()));
  if (!saving_) return;
  CheckpointExtras extras;
  extras.state["in_flight"] = in_flight_point(iteration).to_json();
  if (side_ == StageSide::kTrainer) extras.files.push_back({inbox_file(env_.world->rank()), encode_inbox(state_.inbox)});
  const auto generators = channel_.receive_generator_states();  // on the trainer's first rank
  for (size_t j = 0; j < generators.size(); ++j)
    extras.files.push_back({generator_file(stage_.generator().mesh.first_rank() + int(j)), generators[j]});
  checkpoint(step, extras);
}

InFlightPoint DisaggregatedRun::in_flight_point(int64_t iteration) const {
  InFlightPoint p;
  p.plan_start = plan_.start;
  p.plan_staleness = plan_staleness();
  p.sync_iteration = iteration;
  p.world = env_.world->size();
  p.trainer_dp = stage_.policy().mesh.dp();
  p.generator_dp = stage_.generator().mesh.dp();
  p.generator_tp = stage_.generator().mesh.tp();
  return p;
}

namespace {
std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string text = fs::read_file(path, "checkpoint file");
  return {text.begin(), text.end()};
}
}  // namespace

void DisaggregatedRun::re_enter(int64_t start) {
  const std::string& dir = *env_.resume_from;
  const nlohmann::json state = read_checkpoint_state(dir);
  if (!state.contains("in_flight")) return;  // written at an update: what was in flight is generated again
  const InFlightPoint saved = InFlightPoint::from_json(state["in_flight"], dir + "/state.json");
  const InFlightPoint now = in_flight_point(saved.sync_iteration);
  std::optional<RoundPlan> plan;
  if (saved.same_layout(now) && saved.plan_staleness == now.plan_staleness)
    plan = resume_plan(plan_rounds(saved.plan_start, cfg_.iterations, saved.plan_staleness), saved.sync_iteration);
  if (!plan || plan->sync_versions().front() != start) {
    if (env_.world->rank() == 0)
      spdlog::warn("{}: {} holds the samples in flight for another layout or schedule; they are generated again",
                   stage_.name(), dir);
    return;
  }
  plan_ = std::move(*plan);
  const int me = env_.world->rank();
  if (side_ == StageSide::kTrainer) {
    const std::string path = dir + "/" + inbox_file(me);
    state_.inbox = decode_inbox(read_bytes(path), path);
  }
  if (side_ == StageSide::kGenerator) {
    const std::string path = dir + "/" + generator_file(me);
    stage_.producer().restore(decode_generator(read_bytes(path), path), path);
  }
  if (me == 0)
    spdlog::info("{}: re-entering the round plan at the sync before iteration {} with the samples in flight there",
                 stage_.name(), saved.sync_iteration);
}

StageResult run_disaggregated(StageEnv& env, PolicyStage& stage, PolicyTraining& training) {
  return DisaggregatedRun(env, stage, training).run();
}

}  // namespace hpcrl::algo
