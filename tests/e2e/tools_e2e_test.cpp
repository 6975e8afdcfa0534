// End-to-end: multi-turn GRPO over the calculator (tests/e2e/data/tiny_tools.yaml:
// 2-digit products, SFT on traces that call it). The run reports the tools'
// metrics every iteration; colocated and disaggregated (synchronous) runs on
// the same seed give the same trajectories and updates; asynchronous
// generation completes and reports its staleness; dp = 2 samples what one rank
// samples; a stop signal mid-stage ends with exit 75 and --resume repeats the
// uninterrupted run line for line.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kTools = "tests/e2e/data/tiny_tools.yaml";
// tiny_tools.yaml's SFT stage (with its multi-turn evaluations), as a --set value.
constexpr const char* kSftStage =
    "{sft: {model: policy, data: products, steps: 100, batch: 32, lr: 3.0e-3, warmup: 4, schedule: cosine, "
    "tools: {use: [calculator], format: tags, call: text, open: <calc>, close: </calc>, "
    "reply_tokens: 12}}}";

std::vector<nlohmann::json> grpo_lines(const std::string& run_dir) {
  return lines_with(read_metrics(run_dir + "/metrics.jsonl"), "grpo", "reward/mean");
}
}  // namespace

TEST(ToolsE2E, MultiTurnGrpoReportsTheToolsEveryIteration) {
  const std::string dir = scratch_dir("tools-metrics");
  Proc p = run_hpcrl("run " + kTools + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto lines = grpo_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 3u);
  double calls = 0;
  for (const auto& line : lines) {
    for (const char* key : {"tools/calls", "tools/errors", "seconds/tool_call", "tools/reply_tokens",
                            "tools/model_tokens"})
      EXPECT_TRUE(line.contains(key)) << key << " missing from " << line.dump();
    calls += line.value("tools/calls", 0.0);
    // A reply is "<result>" + the product (1 or 2 digits, or an error observation cut to
    // reply_tokens 12) + "</result>": at most 8 + 12 + 9 = 29 byte tokens; a call whose reply
    // would not fit before max_new_tokens ends its row with none.
    if (line.value("tools/calls", 0.0) > 0)
      EXPECT_LE(line["tools/reply_tokens"].get<double>() / line["tools/calls"].get<double>(), 29.0);
  }
  EXPECT_GT(calls, 0.5) << "after SFT on calling traces, the model calls the calculator";
  const auto evals = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "eval/accuracy");
  ASSERT_FALSE(evals.empty());
}

namespace {
// tiny_tools.yaml's SFT stage alone, saved under DIR/sft; returns
// tiny_tools_grpo.yaml on that policy, written to DIR/grpo.yaml.
std::string grpo_on_sft_policy(const std::string& dir) {
  Proc sft = run_hpcrl("run " + kTools + " --set 'stages=[" + std::string(kSftStage) + "]' --out " + dir + "/sft");
  EXPECT_EQ(sft.exit_code, 0) << sft.output;
  const std::string policy = run_shell("ls -d " + dir + "/sft/checkpoints/00-sft/step-*/policy | tail -1").output;
  std::string cfg = read_text(std::string(HPCRL_SOURCE_DIR) + "/tests/e2e/data/tiny_tools_grpo.yaml");
  cfg.replace(cfg.find("POLICY_DIR"), 10, policy.substr(0, policy.find('\n')));
  std::ofstream(dir + "/grpo.yaml") << cfg;
  return dir + "/grpo.yaml";
}
}  // namespace

TEST(ToolsE2E, HpcrlEvalOverTheStagesToolsReportsTheRunsOwnEvaluation) {
  // `hpcrl eval --tools FILE:0` on the policy an SFT run saved evaluates multi-turn over stage 0's
  // tools, as the run's evaluation after its last step did on the same weights: the same greedy
  // accuracy and mean response length. Without --tools its calls get no reply.
  const std::string dir = scratch_dir("tools-eval");
  Proc sft = run_hpcrl("run " + kTools + " --set 'stages=[" + std::string(kSftStage) + "]' --out " + dir + "/sft");
  ASSERT_EQ(sft.exit_code, 0) << sft.output;
  const auto evals = lines_with(read_metrics(dir + "/sft/metrics.jsonl"), "sft", "eval/accuracy");
  ASSERT_FALSE(evals.empty());
  const std::string policy = run_shell("ls -d " + dir + "/sft/checkpoints/00-sft/step-*/policy | tail -1").output;
  const std::string eval = "eval --model " + policy.substr(0, policy.find('\n')) + " --data " + kTools +
                           ":products --max-new-tokens 56 --json";
  auto report = [](const Proc& p) { return nlohmann::json::parse(p.output.substr(p.output.rfind("{\"model\""))); };
  Proc with = run_hpcrl(eval + " --tools " + kTools + ":0");
  ASSERT_EQ(with.exit_code, 0) << with.output;
  const nlohmann::json a = report(with);
  EXPECT_EQ(a["examples"], 32);
  EXPECT_DOUBLE_EQ(a["pass_at_k"]["1"].get<double>(), evals.back()["eval/accuracy"].get<double>());
  EXPECT_NEAR(a["mean_response_len"].get<double>(), evals.back()["eval/response_len"].get<double>(), 1e-9);
  EXPECT_EQ(a["tools"], kTools + ":0 (calculator)");
  Proc without = run_hpcrl(eval);
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_LT(report(without)["pass_at_k"]["1"].get<double>(), a["pass_at_k"]["1"].get<double>());
}

TEST(ToolsE2E, DisaggregatedSynchronousGivesTheColocatedTrajectories) {
  // From the same SFT policy, generation on a rank of its own samples the colocated run's trajectories
  // (same rewards, lengths and calls) and the trainer makes the same updates.
  const std::string dir = scratch_dir("tools-disagg");
  const std::string cfg = grpo_on_sft_policy(dir);
  Proc colo = run_hpcrl("run " + cfg + " --out " + dir + "/colo");
  ASSERT_EQ(colo.exit_code, 0) << colo.output;
  Proc dis = run_hpcrl("run " + cfg +
                           " --set placement.mode=disaggregated"
                           " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}'"
                           " --out " + dir + "/dis",
                       2);
  ASSERT_EQ(dis.exit_code, 0) << dis.output;
  const auto a = grpo_lines(dir + "/colo"), b = grpo_lines(dir + "/dis");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_GT(a[0]["reward/std"].get<double>(), 0.0) << "no reward spread: the comparison of updates is empty";
  expect_same_rollouts(a, b, {{"loss", 1e-5}, {"kl", 1e-5}, {"grad_norm", 1e-5}, {"tools/calls", 0},
                              {"tools/reply_tokens", 0}});
}

TEST(ToolsE2E, AsynchronousGenerationWithToolsCompletesAndReportsStaleness) {
  // max_staleness 1: generation runs a version ahead of training, multi-turn;
  // the first iteration trains on the SFT policy's samples (staleness 0), the
  // later ones on samples one version old.
  const std::string dir = scratch_dir("tools-async");
  const std::string cfg = grpo_on_sft_policy(dir);
  Proc run = run_hpcrl("run " + cfg +
                           " --set placement.mode=disaggregated"
                           " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}'"
                           " --set stages[0].grpo.iterations=3 --set stages[0].grpo.async.max_staleness=1"
                           " --out " + dir + "/async",
                       2);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto lines = grpo_lines(dir + "/async");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].at("staleness/max").get<double>(), 0.0);
  EXPECT_EQ(lines[2].at("staleness/max").get<double>(), 1.0);
  for (const auto& line : lines) EXPECT_GT(line.at("tools/calls").get<double>(), 0.5);
}

TEST(ToolsE2E, PartialRolloutsContinueMultiTurnResponsesAcrossUpdatesAndRepeatExactly) {
  // Generation on rank 1 with partial rollouts, 12 slots for the groups in flight: a round ends with
  // rows part-way (some waiting for the calculator, which take its reply first), and they continue
  // under the next weights. Two runs are the same run; every iteration calls the tool; no trained
  // token is staler than max_staleness 2, and some trained samples span an update.
  const std::string dir = scratch_dir("tools-partial");
  const std::string cfg = grpo_on_sft_policy(dir);
  const std::string partial = " --set placement.mode=disaggregated"
                              " --set 'placement.ranges={policy: [0, 0], reference: [0, 0], policy.rollout: [1, 1]}'"
                              " --set stages[0].grpo.iterations=4 --set stages[0].grpo.async.max_staleness=2"
                              " --set stages[0].grpo.async.partial_rollouts=true --set models.policy.rollout.max_batch=12";
  Proc first = run_hpcrl("run " + cfg + partial + " --out " + dir + "/first", 2);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Proc second = run_hpcrl("run " + cfg + partial + " --out " + dir + "/second", 2);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const auto a = grpo_lines(dir + "/first"), b = grpo_lines(dir + "/second");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  double spanning = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"reward/mean", "tools/calls", "response_len/mean", "staleness/spanning_samples"})
      EXPECT_EQ(a[i].at(key), b[i].at(key)) << key << ", iteration " << i + 1;
    EXPECT_GT(a[i].at("tools/calls").get<double>(), 0.5) << "iteration " << i + 1;
    EXPECT_LE(a[i].at("staleness/max").get<double>(), 2.0) << "iteration " << i + 1;
    spanning = std::max(spanning, a[i].at("staleness/spanning_samples").get<double>());
  }
  EXPECT_GT(spanning, 0.0) << "no trained sample crossed a weight update: nothing was continued";
}

TEST(ToolsE2E, TwoDataParallelRanksSampleWhatOneRankSamples) {
  // Draws are keyed by (seed, global prompt, sample, own-token step) and the
  // calculator is deterministic, so from the same weights dp = 2 has the
  // same trajectories: the first iteration's rewards, lengths and calls; its
  // update agrees up to the reduction order.
  const std::string dir = scratch_dir("tools-dp");
  const std::string cfg = grpo_on_sft_policy(dir);
  auto [one, two] = run_twice(cfg, "tools-dp-runs", 1, "", 2, "grpo", "reward/mean");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_GT(one[0]["reward/std"].get<double>(), 0.0) << "no reward spread: the comparison of updates is empty";
  expect_same_rollouts({one[0]}, {two[0]}, {{"loss", 1e-5}, {"kl", 1e-4}, {"tools/calls", 0},
                                            {"tools/reply_tokens", 0}});
}

TEST(ToolsE2E, AStopSignalMidStageEndsWithExit75AndResumesExactly) {
  const std::string dir = scratch_dir("tools-stop");
  const std::string cfg = kTools + " --set stages[1].grpo.iterations=6 --set run.checkpoint_every=1";
  Proc whole = run_hpcrl("run " + cfg + " --out " + dir + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto want = grpo_lines(dir + "/whole");
  ASSERT_EQ(want.size(), 6u);
  const int pid = spawn_hpcrl("run " + cfg + " --out " + dir + "/run", 1, dir + "/log");
  for (int i = 0; i < 2400 && grpo_lines(dir + "/run").size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_EQ(::kill(pid, SIGUSR1), 0);
  EXPECT_EQ(wait_exit(pid), 75) << read_text(dir + "/log");
  ASSERT_LT(grpo_lines(dir + "/run").size(), 6u) << "the signal came after the last iteration";
  Proc resumed = run_hpcrl("run " + cfg + " --out " + dir + "/run --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto again = grpo_lines(dir + "/run");
  ASSERT_EQ(again.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(without_timing(want[i]), without_timing(again[i])) << "line " << i;
}

// SFT on tool traces written as conversations (data.<d>.jsonl.messages): the same 8 traces flattened into
// prompt/response text give the same token rows, but there every token is trained, while the conversation run
// leaves each tool message out of the loss. The reply holds the product's digits, which the model cannot predict
// from the prompt, so after 10 steps the conversation run's loss (over the tokens it trains) is the lower one
// (measured: 2.33 against 2.54).
TEST(ToolsE2E, SftOnConversationTracesLeavesTheToolMessagesOutOfTheLoss) {
  const std::string dir = scratch_dir("tools-conversations");
  const std::string cfg = "tests/e2e/data/sft_tool_traces.yaml";
  Proc conv = run_hpcrl("run " + cfg + " --set stages[0].sft.steps=10 --out " + dir + "/conv");
  ASSERT_EQ(conv.exit_code, 0) << conv.output;
  // The flat file's keys instead of the conversation's (the data line of the config, edited).
  std::string text = read_text(cfg);
  const size_t at = text.find("jsonl: {path: tests/e2e/data/tool_traces.jsonl");
  ASSERT_NE(at, std::string::npos);
  const size_t end = text.find("}}", at);
  text.replace(at, end - at + 1, "jsonl: {path: tests/e2e/data/tool_traces_flat.jsonl, eval_path: "
                                 "tests/e2e/data/tool_traces_flat.jsonl, prompt: question, response: solution}");
  std::ofstream(dir + "/flat.yaml") << text;
  Proc flat = run_hpcrl("run " + dir + "/flat.yaml --set stages[0].sft.steps=10 --out " + dir + "/flat");
  ASSERT_EQ(flat.exit_code, 0) << flat.output;
  const auto a = lines_with(read_metrics(dir + "/conv/metrics.jsonl"), "sft", "loss");
  const auto b = lines_with(read_metrics(dir + "/flat/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  EXPECT_EQ(a[0].at("seq_len/mean"), b[0].at("seq_len/mean"));  // the same token rows
  EXPECT_LT(a[9].at("loss").get<double>(), b[9].at("loss").get<double>() - 0.05);
}

// An environment drives the conversation and scores it: the stage's only tool is an environment program (every
// step answered "step K" with reward 0.25, done at the second step) and its only reward is of type environment, so
// each trajectory scores 0.25 per step it took, and an iteration's mean reward is 0.25 × its calls per trajectory
// less the failed ones (a call the environment never answered earns nothing).
TEST(ToolsE2E, AnEnvironmentsRewardsScoreTheTrajectories) {
  const std::string dir = scratch_dir("tools-environment");
  std::string text = read_text("tests/e2e/data/tiny_environment.yaml");
  const std::string mark = "\"@TOOL_HELPER@\"";  // the command's, not the comment's
  const size_t at = text.find(mark);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, mark.size(), std::string("\"") + HPCRL_TOOL_HELPER + "\"");
  std::ofstream(dir + "/environment.yaml") << text;
  Proc p = run_hpcrl("run " + dir + "/environment.yaml --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto lines = grpo_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 2u);
  double calls = 0;
  for (const auto& line : lines) {
    const double per_trajectory = line.at("tools/calls").get<double>();
    const double answered = per_trajectory - line.at("tools/errors").get<double>();
    EXPECT_NEAR(line.at("reward/mean").get<double>(), 0.25 * answered, 1e-9) << line.dump();
    EXPECT_LE(per_trajectory, 2.0);  // done at the second step: no trajectory steps a third time
    calls += per_trajectory;
  }
  EXPECT_GT(calls, 0.5) << "after SFT on calling traces, the model calls the environment";
}

// Tool trajectories train the same in every training layout: from one SFT policy, packed rows, the policy and
// reference pipelined (pp = 2), tensor-parallel (tp = 2, generation too) and sequence-parallel (sp = 2, packed)
// make the padded one-rank run's updates. The rollouts are the same (the calculator answers at once), and the
// inserted replies stay out of every loss.
TEST(ToolsE2E, PackedPipelinedTensorAndSequenceParallelUpdatesOnToolTrajectoriesFollowOneRank) {
  const std::string dir = scratch_dir("tools-layouts");
  const std::string cfg = grpo_on_sft_policy(dir) + " --set stages[0].grpo.loss_agg=seq_mean_token_mean";
  Proc base = run_hpcrl("run " + cfg + " --out " + dir + "/base");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const auto a = grpo_lines(dir + "/base");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_GT(a[0]["reward/std"].get<double>(), 0.0) << "no reward spread: the comparison of updates is empty";
  EXPECT_GT(a[0]["tools/reply_tokens"].get<double>(), 0.0) << "no reply inserted: nothing for the mask to leave out";
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"packed", " --set stages[0].grpo.packing=true --set stages[0].grpo.micro_batch_tokens=300"},
      {"pp2", " --set models.policy.parallel.pp=2 --set models.reference.parallel.pp=2"},
      {"tp2", " --set models.policy.parallel.tp=2 --set models.reference.parallel.tp=2"},
      {"sp2", " --set models.policy.parallel.sp=2 --set models.reference.parallel.sp=2 --set stages[0].grpo.packing=true"}};
  for (const auto& [name, flags] : layouts) {
    SCOPED_TRACE(name);
    Proc run = run_hpcrl("run " + cfg + flags + " --out " + dir + "/" + name, name == "packed" ? 1 : 2);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    expect_same_rollouts(a, grpo_lines(dir + "/" + name),
                         {{"loss", 1e-5}, {"kl", 1e-4}, {"grad_norm", 1e-4}, {"tools/calls", 0}});
  }
}
