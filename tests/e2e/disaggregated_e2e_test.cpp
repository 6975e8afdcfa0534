// End-to-end under mpirun: GRPO and PPO with generation on ranks of its own
// follow the colocated run on the same seed exactly (same samples, losses, KL
// and grad norms), a generation layout of tp = 2 follows tp = 1, the
// asynchronous k = 1 run starts as the synchronous one and then trains one
// version behind, partial rollouts continue responses across updates and repeat exactly, a model reward on its own rank or beside generation gives
// the colocated run, and a stop signal to a generating or a training rank ends
// every rank with exit 75 and a resume that repeats the uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kGrpo = "tests/e2e/data/grpo_judge.yaml --set stages[0].grpo.iterations=3";
const std::string kPpo = "tests/e2e/data/ppo_judge.yaml";
// One trainer rank (with the reference, and for PPO the critic), one generating rank.
const std::string kOneAndOne =
    " --set placement.mode=disaggregated"
    " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}'";
const std::string kOneAndOnePpo =
    " --set placement.mode=disaggregated"
    " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], critic: [0, 0], policy.rollout: [1, 1]}'";
const std::vector<std::pair<std::string, double>> kTrainingMetrics{
    {"loss", 1e-5}, {"kl", 1e-5}, {"grad_norm", 1e-5}, {"entropy", 1e-5}};

// The GRPO test run with its roles on `ranges` (a YAML mapping), under mpirun -np `np`.
Proc run_placed(const std::string& ranges, int np, const std::string& out, const std::string& extra = "") {
  return run_hpcrl("run " + kGrpo + " --set placement.mode=disaggregated --set 'placement.ranges=" + ranges + "'" +
                       extra + " --out " + out,
                   np);
}

// `cfg` colocated on one rank into DIR/colo, and with `placement` (--set overrides) on `np` ranks into DIR/dis;
// false, with the failing run's output as a gtest failure, unless both exit 0.
bool run_colocated_and_placed(const std::string& cfg, const std::string& placement, int np, const std::string& dir) {
  Proc colo = run_hpcrl("run " + cfg + " --out " + dir + "/colo");
  EXPECT_EQ(colo.exit_code, 0) << colo.output;
  Proc dis = run_hpcrl("run " + cfg + placement + " --out " + dir + "/dis", np);
  EXPECT_EQ(dis.exit_code, 0) << dis.output;
  return colo.exit_code == 0 && dis.exit_code == 0;
}

std::vector<nlohmann::json> stage_lines(const std::string& dir, const std::string& stage) {
  return lines_with(read_metrics(dir + "/metrics.jsonl"), stage, "reward/mean");
}

// The pid of world rank `rank` among mpirun's children (from its OMPI_COMM_WORLD_RANK).
int rank_pid(int mpirun_pid, int rank) {
  Proc kids = run_shell("pgrep -P " + std::to_string(mpirun_pid) + " -f 'hpcrl run'");
  std::istringstream in(kids.output);
  for (int pid; in >> pid;) {
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
    std::string var;
    while (std::getline(env, var, '\0'))
      if (var == "OMPI_COMM_WORLD_RANK=" + std::to_string(rank)) return pid;
  }
  return -1;
}

// Starts the run on `np` ranks, waits for `lines` metrics lines of `stage`, signals world rank `rank`.
int run_and_signal(const std::string& args, const std::string& dir, int rank, int sig, size_t lines, int np = 2,
                   const std::string& stage = "grpo") {
  int pid = spawn_hpcrl(args, np, dir + "/log");
  for (int i = 0; i < 1200 && stage_lines(dir + "/run", stage).size() < lines; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int target = rank_pid(pid, rank);
  EXPECT_GT(target, 0) << "rank " << rank << " not found under mpirun " << pid;
  if (target > 0) ::kill(target, sig);
  return pid;
}
}  // namespace

TEST(DisaggregatedE2E, GrpoOneGeneratorOneTrainerMatchesColocated) {
  std::string dir = scratch_dir("disagg-grpo");
  ASSERT_TRUE(run_colocated_and_placed(kGrpo, kOneAndOne, 2, dir));
  const auto a = stage_lines(dir + "/colo", "grpo"), b = stage_lines(dir + "/dis", "grpo");
  ASSERT_EQ(a.size(), 3u);
  expect_same_rollouts(a, b, kTrainingMetrics);  // every iteration: the weights after each sync are the trainer's
  for (const auto& line : b) {
    EXPECT_EQ(line.at("staleness/max"), 0.0);
    EXPECT_GT(line.at("weight_sync/bytes").get<double>(), 0.0);
  }
}

TEST(DisaggregatedE2E, AWholePipelineWithGenerationApartEqualsColocated) {
  // SFT and distillation run on rank 0 while rank 1, which only generates for GRPO, idles through them.
  const std::string cfg = "tests/e2e/data/tiny.yaml --set stages[0].sft.steps=10 --set stages[1].grpo.iterations=2"
                          " --set stages[2].distill.steps=2 --set run.eval_before_train=false";
  std::string dir = scratch_dir("disagg-pipeline");
  ASSERT_TRUE(run_colocated_and_placed(cfg, " --set placement.mode=disaggregated --set 'placement.ranges={policy: "
                                       "[0, 0], reference: [0, 0], student: [0, 0], policy.rollout: [1, 1]}'", 2, dir));
  const auto a = read_metrics(dir + "/colo/metrics.jsonl"), b = read_metrics(dir + "/dis/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    nlohmann::json x = without_timing(a[i]), y = without_timing(b[i]);
    for (auto it = y.begin(); it != y.end();)  // what only a disaggregated run reports
      it = it.key().rfind("staleness/", 0) == 0 || it.key() == "weight_sync/bytes" ? y.erase(it) : std::next(it);
    EXPECT_EQ(x, y) << "line " << i;
  }
}

TEST(DisaggregatedE2E, PpoWithItsCriticOnTheTrainerMatchesColocated) {
  std::string dir = scratch_dir("disagg-ppo");
  ASSERT_TRUE(run_colocated_and_placed(kPpo, kOneAndOnePpo, 2, dir));
  auto close = kTrainingMetrics;
  close.emplace_back("critic/loss", 1e-5);
  close.emplace_back("critic/values_mean", 1e-5);
  expect_same_rollouts(stage_lines(dir + "/colo", "ppo"), stage_lines(dir + "/dis", "ppo"), close);
}

TEST(DisaggregatedE2E, AReferenceOnRanksOfItsOwnGivesTheColocatedRun) {
  std::string dir = scratch_dir("disagg-ref");
  // Trainer on rank 0, reference on rank 1 (snapshotted there from the policy), generation on rank 2.
  ASSERT_TRUE(run_colocated_and_placed(kGrpo, " --set placement.mode=disaggregated --set 'placement.ranges={policy: "
                                       "[0, 0], reference: [1, 1], policy.rollout: [2, 2]}'", 3, dir));
  const auto a = stage_lines(dir + "/colo", "grpo"), b = stage_lines(dir + "/dis", "grpo");
  expect_same_rollouts(a, b, kTrainingMetrics);
  EXPECT_GT(b.back().at("kl").get<double>(), 0.0);  // the reference's log-probs arrived
}

TEST(DisaggregatedE2E, AtFourRanksTheReferenceOnItsOwnRankGivesTheRunWithItOnTheTrainers) {
  // Two generating replicas in both runs: their samples merge in replica order on the trainer.
  std::string dir = scratch_dir("disagg-ref4");
  Proc shared = run_placed("{policy: [0, 0], reference: [0, 0], policy.rollout: [1, 2]}", 3, dir + "/shared");
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  Proc own = run_placed("{policy: [0, 0], reference: [1, 1], policy.rollout: [2, 3]}", 4, dir + "/own");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  expect_same_rollouts(stage_lines(dir + "/shared", "grpo"), stage_lines(dir + "/own", "grpo"), kTrainingMetrics);
}

TEST(DisaggregatedE2E, PpoWithReferenceAndCriticOnRanksOfTheirOwnMatchesColocated) {
  std::string dir = scratch_dir("disagg-ppo4");
  // Trainer 0, reference 1, critic 2 (values, then its own updates on the returns), generation 3.
  ASSERT_TRUE(run_colocated_and_placed(kPpo, " --set placement.mode=disaggregated --set 'placement.ranges={policy: "
                                       "[0, 0], reference: [1, 1], critic: [2, 2], policy.rollout: [3, 3]}'", 4, dir));
  auto close = kTrainingMetrics;
  close.emplace_back("critic/loss", 1e-5);
  close.emplace_back("critic/clip_frac", 1e-5);
  close.emplace_back("critic/values_mean", 1e-5);
  expect_same_rollouts(stage_lines(dir + "/colo", "ppo"), stage_lines(dir + "/dis", "ppo"), close);
}

TEST(DisaggregatedE2E, DistillationWithTheTeacherOnItsOwnRankFollowsColocated) {
  const std::string distill = "tests/e2e/data/tiny.yaml --set run.eval_before_train=false --set 'stages=[{distill: "
                              "{teacher: policy, student: student, data: arith, steps: 6, batch: 16, lr: 3.0e-3, "
                              "top_k: 16, on_policy: ON, max_new_tokens: 16}}]'";
  const std::string apart = " --set placement.mode=disaggregated"
                            " --set 'placement.ranges={student: [0, 0], policy: [1, 1], reference: [1, 1]}'";
  for (const std::string on_policy : {"false", "true"}) {
    std::string cfg = distill;
    cfg.replace(cfg.find("ON"), 2, on_policy);
    std::string dir = scratch_dir("disagg-distill-" + on_policy);
    // The student trains on rank 0; the teacher answers its top-k from rank 1.
    ASSERT_TRUE(run_colocated_and_placed(cfg, apart, 2, dir));
    const auto a = lines_with(read_metrics(dir + "/colo/metrics.jsonl"), "distill", "loss");
    const auto b = lines_with(read_metrics(dir + "/dis/metrics.jsonl"), "distill", "loss");
    ASSERT_EQ(a.size(), 6u);
    expect_close_curves(a, b, "loss", 1e-6);
    expect_close_curves(a, b, "grad_norm", 1e-6);
  }
}

TEST(DisaggregatedE2E, GenerationAtTp2FollowsGenerationAtTp1) {
  std::string dir = scratch_dir("disagg-tp2");
  Proc tp1 = run_hpcrl("run " + kGrpo + kOneAndOne + " --out " + dir + "/tp1", 2);
  ASSERT_EQ(tp1.exit_code, 0) << tp1.output;
  // The full tensors reach both generating ranks; each loads its tp slices.
  Proc tp2 = run_placed("{policy: [0, 0], reference: [0, 0], policy.rollout: [1, 2]}", 3, dir + "/tp2",
                        " --set models.policy.rollout.parallel.tp=2");
  ASSERT_EQ(tp2.exit_code, 0) << tp2.output;
  expect_same_rollouts(stage_lines(dir + "/tp1", "grpo"), stage_lines(dir + "/tp2", "grpo"), kTrainingMetrics);
}

TEST(DisaggregatedE2E, ColocatedGenerationInAnotherLayoutFollowsThatLayoutUsedForTraining) {
  std::string dir = scratch_dir("hybrid");
  // Both generate at tp = 1 × dp = 2 (4 prompts per rank): one also trains there, the other trains at tp = 2 and
  // reshards into a generation copy before each rollout, then re-deals the samples to its single dp rank.
  Proc same = run_hpcrl("run " + kGrpo + " --out " + dir + "/dp2", 2);
  ASSERT_EQ(same.exit_code, 0) << same.output;
  Proc hybrid = run_hpcrl("run " + kGrpo + " --set models.policy.parallel.tp=2 --set models.reference.parallel.tp=2"
                          " --set models.policy.rollout.parallel.tp=1 --out " + dir + "/tp2",
                          2);
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.output;
  const auto a = stage_lines(dir + "/dp2", "grpo"), b = stage_lines(dir + "/tp2", "grpo");
  ASSERT_EQ(b.size(), 3u);
  // Iteration 1: the same samples from the same weights; training at tp = 2 sums in another order than at dp = 2.
  expect_same_rollouts({a[0]}, {b[0]}, {{"loss", 1e-5}, {"kl", 1e-5}, {"grad_norm", 1e-4}});
  EXPECT_TRUE(b[0].contains("seconds/weight_sync"));
  EXPECT_FALSE(a[0].contains("seconds/weight_sync"));  // the same layout generates with the trained model itself
}

TEST(DisaggregatedE2E, AsyncOneStepStartsSynchronousThenTrainsOneVersionBehind) {
  std::string dir = scratch_dir("disagg-async");
  const std::string grpo = kGrpo + kOneAndOne + " --set stages[0].grpo.iterations=4";
  Proc sync = run_hpcrl("run " + grpo + " --out " + dir + "/sync", 2);
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  Proc async = run_hpcrl("run " + grpo + " --set stages[0].grpo.async.max_staleness=1 --set stages[0].grpo.tis_cap=2"
                         " --out " + dir + "/async", 2);
  ASSERT_EQ(async.exit_code, 0) << async.output;
  const auto s = stage_lines(dir + "/sync", "grpo"), a = stage_lines(dir + "/async", "grpo");
  ASSERT_EQ(a.size(), 4u);
  // Iteration 1 samples the same first weights; behaviour = old there, so every weight is 1.
  expect_same_rollouts({s[0]}, {a[0]}, kTrainingMetrics);
  EXPECT_NEAR(a[0].at("offpolicy/iw_max").get<double>(), 1.0, 1e-4);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at("staleness/max").get<double>(), i == 0 ? 0.0 : 1.0) << "iteration " << i + 1;
    EXPECT_EQ(a[i].at("staleness/dropped_samples").get<double>(), 0.0);
    EXPECT_LE(a[i].at("offpolicy/iw_capped_share").get<double>(), 1.0);
  }
  // Later iterations sample weights one update older than the trainer's: the two policies differ.
  EXPECT_GT(a[1].at("offpolicy/kl_behaviour_old").get<double>(), 0.0);
  EXPECT_NE(a[1].at("reward/mean"), s[1].at("reward/mean"));
}

// The coupled objective clips r = π_θ/π_b; the decoupled one clips π_θ/π_old and weighs by w = π_old/π_b. With a
// clip no ratio reaches (tokens' ratios stay within [0.01, 101]) and no cap, both are −A·π_θ/π_b with the same
// gradient, so the two runs train alike — but only the decoupled one computes π_old (here, one optimizer step a
// batch, from the update's own forward: no pass of its own) and reports the importance weights.
TEST(DisaggregatedE2E, AsyncCoupledObjectiveIsTheDecoupledOneWithoutItsOldLogProbs) {
  std::string dir = scratch_dir("disagg-coupled");
  const std::string grpo = kGrpo + kOneAndOne +
                           " --set stages[0].grpo.iterations=4 --set stages[0].grpo.async.max_staleness=1"
                           " --set 'stages[0].grpo.clip=[0.99, 100]'";
  Proc decoupled = run_hpcrl("run " + grpo + " --out " + dir + "/decoupled", 2);
  ASSERT_EQ(decoupled.exit_code, 0) << decoupled.output;
  Proc coupled = run_hpcrl("run " + grpo + " --set stages[0].grpo.recompute_old_logprobs=false --out " + dir +
                           "/coupled", 2);
  ASSERT_EQ(coupled.exit_code, 0) << coupled.output;
  const auto d = stage_lines(dir + "/decoupled", "grpo"), c = stage_lines(dir + "/coupled", "grpo");
  ASSERT_EQ(c.size(), 4u);
  expect_same_rollouts(d, c, kTrainingMetrics);
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].at("staleness/max").get<double>(), i == 0 ? 0.0 : 1.0) << "iteration " << i + 1;
    EXPECT_TRUE(d[i].contains("offpolicy/iw_mean")) << "iteration " << i + 1;
    EXPECT_FALSE(d[i].contains("seconds/old_logprob")) << "iteration " << i + 1;  // π_old: the update's forward
    EXPECT_FALSE(c[i].contains("seconds/old_logprob") || c[i].contains("offpolicy/iw_mean")) << "iteration " << i + 1;
  }
  // Not vacuous: from iteration 2 the behaviour policy lags (π_old ≠ π_b), so dropping w or clipping around π_old
  // in the coupled run would part the losses.
  EXPECT_GT(d[1].at("offpolicy/kl_behaviour_old").get<double>(), 0.0);
}

// Partial rollouts: 12 slots for 16 groups of 4 in flight, so a round ends (8 groups complete) with rows part-way,
// which continue under the next weights. Two runs are the same run (the swap point is fixed by the generation and
// the plan, not by timing); from iteration 3 some trained samples hold tokens of two versions, and no token is
// staler than max_staleness 2.
TEST(DisaggregatedE2E, PartialRolloutsContinueResponsesAcrossUpdatesAndRepeatExactly) {
  std::string dir = scratch_dir("disagg-partial");
  const std::string grpo = kGrpo + kOneAndOne +
                           " --set stages[0].grpo.iterations=5 --set stages[0].grpo.async.max_staleness=2"
                           " --set stages[0].grpo.async.partial_rollouts=true --set models.policy.rollout.max_batch=12";
  Proc first = run_hpcrl("run " + grpo + " --out " + dir + "/first", 2);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Proc second = run_hpcrl("run " + grpo + " --out " + dir + "/second", 2);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const auto a = stage_lines(dir + "/first", "grpo"), b = stage_lines(dir + "/second", "grpo");
  ASSERT_EQ(a.size(), 5u);
  expect_same_rollouts(a, b, kTrainingMetrics);
  double spanning = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(a[i].at("staleness/max").get<double>(), 2.0) << "iteration " << i + 1;
    EXPECT_EQ(a[i].at("staleness/spanning_samples"), b[i].at("staleness/spanning_samples")) << "iteration " << i + 1;
    spanning = std::max(spanning, a[i].at("staleness/spanning_samples").get<double>());
  }
  EXPECT_EQ(a[0].at("staleness/spanning_samples").get<double>(), 0.0);  // the first round's weights: one version
  EXPECT_GT(spanning, 0.0) << "no trained sample crossed a weight update: nothing was continued";
}

TEST(DisaggregatedE2E, AModelRewardOnItsOwnRankOrBesideGenerationGivesTheColocatedRun) {
  // The judge plus a reward model snapshotted from the policy (a score that varies from response to response).
  const std::string rm = " --set 'models.rm={init: {from: policy}, head: value}'"
                         " --set 'rewards.rm={type: model, model: rm}' --set 'stages[0].grpo.reward=[judge, rm]'";
  std::string dir = scratch_dir("disagg-rm");
  // Trainer and reference on rank 0, generation on rank 1, the reward model on rank 2 of its own.
  ASSERT_TRUE(run_colocated_and_placed(kGrpo + rm, " --set placement.mode=disaggregated --set 'placement.ranges={"
                                       "policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1], rm: [2, 2]}'",
                                       3, dir));
  const auto colo = stage_lines(dir + "/colo", "grpo");
  expect_same_rollouts(colo, stage_lines(dir + "/dis", "grpo"), kTrainingMetrics);
  // The reward model beside generation on rank 1.
  Proc beside = run_placed("{policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1], rm: [1, 1]}", 2,
                           dir + "/beside", rm);
  ASSERT_EQ(beside.exit_code, 0) << beside.output;
  expect_same_rollouts(colo, stage_lines(dir + "/beside", "grpo"), kTrainingMetrics);
  // Its scores were added: the judge alone gives another reward.
  Proc judge = run_hpcrl("run " + kGrpo + " --out " + dir + "/judge");
  ASSERT_EQ(judge.exit_code, 0) << judge.output;
  EXPECT_NE(stage_lines(dir + "/judge", "grpo")[0].at("reward/mean"), colo[0].at("reward/mean"));
  // The trace gives the reward model's ranks a row of their own.
  Proc summary = run_hpcrl("trace summarize " + dir + "/dis");
  EXPECT_NE(summary.output.find("| grpo | reward model | 1 |"), std::string::npos) << summary.output;
}

namespace {
// Runs `args` into SUB/run, signals world rank `rank` with SIGUSR1 once `stage` has begun, expects exit 75 before
// the last of `whole`'s lines, calls `stopped` on the stop's checkpoint directory, resumes (re-entering the round
// plan at the stop's sync), and expects the resumed run's lines to be `whole` (timing aside).
void expect_stop_resumes_exactly(const std::string& args, const std::string& sub, int np, int rank,
                                 const std::vector<nlohmann::json>& whole, const std::string& stage = "grpo",
                                 const std::function<void(const std::string&)>& stopped = {}) {
  std::filesystem::create_directories(sub);
  int pid = run_and_signal("run " + args + " --out " + sub + "/run", sub, rank, SIGUSR1, 2, np, stage);
  EXPECT_EQ(wait_exit(pid), 75) << run_shell("cat " + sub + "/log").output;
  ASSERT_LT(stage_lines(sub + "/run", stage).size(), whole.size()) << "the signal came after the last iteration";
  const std::string step = run_shell("ls -d " + sub + "/run/checkpoints/*-" + stage + "/step-* | tail -1").output;
  if (stopped) stopped(step.substr(0, step.find('\n')));
  Proc resumed = run_hpcrl("run " + args + " --out " + sub + "/run --resume", np);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("re-entering the round plan at the sync before iteration"), std::string::npos)
      << resumed.output;
  const auto again = stage_lines(sub + "/run", stage);
  ASSERT_EQ(again.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(without_timing(whole[i]), without_timing(again[i])) << "line " << i;
}
}  // namespace

// grpo_judge.yaml and ppo_judge.yaml measure the request line without its
// "index" (a count of requests since the process started, which a resumed run
// restarts), so a resumed run scores as the uninterrupted one.
TEST(DisaggregatedE2E, StopSignalToTheGeneratorOrTheTrainerEndsEveryRankAndResumesExactly) {
  std::string dir = scratch_dir("disagg-stop");
  std::filesystem::create_directories(dir);
  const std::string grpo =
      std::string("tests/e2e/data/grpo_judge.yaml") + kOneAndOne + " --set stages[0].grpo.iterations=8";
  Proc full = run_hpcrl("run " + grpo + " --out " + dir + "/full", 2);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto whole = stage_lines(dir + "/full", "grpo");
  ASSERT_EQ(whole.size(), 8u);
  for (int rank : {1, 0}) {  // the generating rank, then the trainer's
    const std::string sub = dir + "/rank" + std::to_string(rank);
    std::filesystem::create_directories(sub);
    int pid = run_and_signal("run " + grpo + " --out " + sub + "/run", sub, rank, SIGUSR1, 2);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(wait_exit(pid), 75) << run_shell("cat " + sub + "/log").output;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
    EXPECT_LT(stage_lines(sub + "/run", "grpo").size(), 8u) << "the signal came after the last iteration";
    Proc resumed = run_hpcrl("run " + grpo + " --out " + sub + "/run --resume", 2);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const auto again = stage_lines(sub + "/run", "grpo");
    ASSERT_EQ(again.size(), whole.size()) << "signalled rank " << rank;
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT_EQ(without_timing(whole[i]), without_timing(again[i])) << "rank " << rank << ", line " << i;
  }
}

// With partial rollouts the stop comes at a sync where rows are paused and prompts are drawn ahead: the checkpoint
// keeps them (stages/in_flight.h) with the trainer's samples not yet trained on, and the resumed run re-enters the
// round plan there and repeats the uninterrupted run line for line.
TEST(DisaggregatedE2E, StopSignalWithPartialRolloutsKeepsThePausedRowsAndResumesExactly) {
  std::string dir = scratch_dir("disagg-partial-stop");
  const std::string grpo = std::string("tests/e2e/data/grpo_judge.yaml") + kOneAndOne +
                           " --set stages[0].grpo.iterations=8 --set stages[0].grpo.async.max_staleness=2"
                           " --set stages[0].grpo.async.partial_rollouts=true --set models.policy.rollout.max_batch=12";
  Proc full = run_hpcrl("run " + grpo + " --out " + dir + "/full", 2);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto whole = stage_lines(dir + "/full", "grpo");
  ASSERT_EQ(whole.size(), 8u);
  // The generator's file holds its groups in flight: with 12 slots for 16 groups of 4, some are always unfinished.
  expect_stop_resumes_exactly(grpo, dir + "/stopped", 2, 1, whole, "grpo", [](const std::string& step) {
    EXPECT_GT(std::filesystem::file_size(step + "/in-flight/generator-rank-00001.bin"), 1000u) << step;
  });
}

// async.keep_stale_cache: paused responses continue from the keys/values the old weights computed instead of a
// re-prefill. The run differs from the re-prefilling one (the option is obeyed), and a stop keeps each paused row's
// cache in the checkpoint, so the resumed run still repeats the uninterrupted one line for line.
TEST(DisaggregatedE2E, PartialRolloutsWithAKeptStaleCacheDifferFromReprefillAndResumeExactly) {
  std::string dir = scratch_dir("disagg-stale-cache");
  const std::string partial = std::string("tests/e2e/data/grpo_judge.yaml") + kOneAndOne +
                              " --set stages[0].grpo.iterations=8 --set stages[0].grpo.async.max_staleness=2"
                              " --set stages[0].grpo.async.partial_rollouts=true --set models.policy.rollout.max_batch=12";
  const std::string kept = partial + " --set stages[0].grpo.async.keep_stale_cache=true";
  Proc reprefill = run_hpcrl("run " + partial + " --out " + dir + "/reprefill", 2);
  ASSERT_EQ(reprefill.exit_code, 0) << reprefill.output;
  Proc full = run_hpcrl("run " + kept + " --out " + dir + "/full", 2);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto whole = stage_lines(dir + "/full", "grpo");
  const auto other = stage_lines(dir + "/reprefill", "grpo");
  ASSERT_EQ(whole.size(), 8u);
  ASSERT_EQ(other.size(), 8u);
  bool differs = false;
  for (size_t i = 0; i < 8; ++i) differs = differs || whole[i].at("loss") != other[i].at("loss");
  EXPECT_TRUE(differs) << "keep_stale_cache changed nothing";
  expect_stop_resumes_exactly(kept, dir + "/stopped", 2, 1, whole);
}

// Asynchronous (k = 1) checkpoints every 2 updates are written at the sync that carries that version (S3 after U1),
// with the samples of iteration 2 generated but not trained on: resuming from step 2 repeats the run exactly,
// where regenerating iteration 2 would sample it with newer weights than the run did.
TEST(DisaggregatedE2E, AsyncCheckpointsHoldTheSamplesInFlightAndResumeExactly) {
  std::string dir = scratch_dir("disagg-async-ckpt");
  const std::string run_args = std::string("tests/e2e/data/grpo_judge.yaml") + kOneAndOne +
                               " --set stages[0].grpo.iterations=6 --set stages[0].grpo.async.max_staleness=1"
                               " --set run.checkpoint_every=2 --set run.keep_last=5 --out " + dir + "/run";
  Proc full = run_hpcrl("run " + run_args, 2);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::string step2 = dir + "/run/checkpoints/00-grpo/step-000002";
  const auto state = nlohmann::json::parse(read_text(step2 + "/state.json"));
  ASSERT_TRUE(state.contains("in_flight")) << state.dump();
  EXPECT_EQ(state["in_flight"]["sync_iteration"], 3);  // k = 1: the sync before G3 carries version 2
  EXPECT_TRUE(std::filesystem::exists(step2 + "/in-flight/trainer-rank-00000.bin"));
  EXPECT_FALSE(nlohmann::json::parse(read_text(dir + "/run/checkpoints/00-grpo/step-000006/state.json"))
                   .contains("in_flight"));  // the last one: nothing is in flight at the stage's end
  expect_exact_resume(run_args, dir + "/run", "00-grpo", 2, 2);
}

TEST(DisaggregatedE2E, StopSignalToACriticOnItsOwnRankCheckpointsItWithTheTrainerAndResumesExactly) {
  std::string dir = scratch_dir("disagg-ppo-stop");
  const std::string ppo = std::string("tests/e2e/data/ppo_judge.yaml") +
                          " --set stages[0].ppo.iterations=8 --set placement.mode=disaggregated"
                          " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], critic: [1, 1], policy.rollout: [2, 2]}'";
  Proc full = run_hpcrl("run " + ppo + " --out " + dir + "/full", 3);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto whole = stage_lines(dir + "/full", "ppo");
  ASSERT_EQ(whole.size(), 8u);
  expect_stop_resumes_exactly(ppo, dir + "/stop", 3, 1, whole, "ppo");
}

TEST(DisaggregatedE2E, AGeneratingRankThatDiesTakesTheJobDownWithin30s) {
  std::string dir = scratch_dir("disagg-kill");
  std::filesystem::create_directories(dir);
  int pid = run_and_signal("run " + kGrpo + kOneAndOne + " --set stages[0].grpo.iterations=40 --out " + dir + "/run",
                           dir, 1, SIGKILL, 1);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(wait_exit(pid), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}
