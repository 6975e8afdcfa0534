// End-to-end pipeline parallelism: `hpcrl run` with the trained role split
// over pp stages follows the single-rank run step by step (fp32), including
// the held-out evaluation (generation on the pp = 1 rollout copy) and the
// saved checkpoint; a GRPO run with a pipelined policy and reference matches
// the single-rank iterations.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";

void expect_close(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b, const std::string& key,
                  double rel_tol) {
  ASSERT_EQ(a.size(), b.size()) << key;
  ASSERT_FALSE(a.empty()) << key;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i][key].get<double>(), y = b[i][key].get<double>();
    EXPECT_NEAR(x, y, rel_tol * std::max(1.0, std::abs(x))) << key << " at line " << i;
  }
}

// SFT of tiny-2l (2 layers: one per stage at pp=2) with 4 micro-batches per rank and step.
const std::string kSft = kConfig +
                         " --set 'stages=[{sft: {model: policy, data: arith, steps: 8, batch: 16, lr: 3.0e-3, "
                         "micro_batch: 4}}]' --set run.eval_before_train=false"
                         " --set run.eval_sampling.prompts=16 --set run.eval_sampling.max_new_tokens=12";

void expect_follows(const std::string& base, const std::string& other) {
  auto a = read_metrics(base + "/metrics.jsonl"), b = read_metrics(other + "/metrics.jsonl");
  auto la = lines_with(a, "sft", "loss"), lb = lines_with(b, "sft", "loss");
  ASSERT_EQ(la.size(), 8u);
  expect_close(la, lb, "loss", 1e-5);
  expect_close(la, lb, "grad_norm", 1e-4);
  // The stage-end evaluation: teacher-forced loss through the pipeline, greedy
  // answers from the rollout copy (same weights, so the same answers).
  auto ea = lines_with(a, "sft", "eval/loss"), eb = lines_with(b, "sft", "eval/loss");
  ASSERT_EQ(ea.size(), 1u);
  expect_close(ea, eb, "eval/loss", 1e-5);
  EXPECT_EQ(ea[0]["eval/accuracy"], eb[0]["eval/accuracy"]);
  EXPECT_EQ(ea[0]["eval/response_len"], eb[0]["eval/response_len"]);
}
}  // namespace

TEST(PipelineParallelE2E, SftPp2FollowsPp1) {
  std::string dir = scratch_dir("pp-sft");
  Proc one = run_hpcrl("run " + kSft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --out " + dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_follows(dir + "/pp1", dir + "/pp2");
  // `trace summarize` reports each stage's bubble next to the 1F1B theory for
  // p = 2 and m = 16 rows / micro_batch 4 = 4 micro-batches: 1/5.
  Proc sum = run_hpcrl("trace summarize " + dir + "/pp2");
  ASSERT_EQ(sum.exit_code, 0) << sum.output;
  EXPECT_NE(sum.output.find("## Pipeline bubble"), std::string::npos) << sum.output;
  for (const char* row : {"| 0 | 1 | 8 | 2 | 4 | 1 | ", "| 1 | 1 | 8 | 2 | 4 | 1 | "}) {
    auto at = sum.output.find(row);
    ASSERT_NE(at, std::string::npos) << row << "\n" << sum.output;
    const std::string line = sum.output.substr(at, sum.output.find('\n', at) - at);
    EXPECT_EQ(line.substr(line.size() - 9), "| 0.200 |") << line;
  }
  // The pipelined run's last checkpoint is an ordinary full HF model with the
  // pp=1 run's weights: both score a sequence the same.
  std::vector<double> scored[2];
  for (int k = 0; k < 2; ++k) {
    Proc where = run_shell("ls -d " + dir + (k ? "/pp2" : "/pp1") + "/checkpoints/*sft/step-000008/policy");
    ASSERT_EQ(where.exit_code, 0) << where.output;
    const std::string ckpt = where.output.substr(0, where.output.find('\n'));
    Proc score = run_hpcrl("score --model " + ckpt + " --ids 1,50,51,43,52,61,10,60 --json");
    ASSERT_EQ(score.exit_code, 0) << score.output;
    auto doc = nlohmann::json::parse(score.output.substr(score.output.rfind("{\"ids\"")));
    scored[k] = doc["logprobs"].get<std::vector<double>>();
  }
  ASSERT_EQ(scored[0].size(), 7u);
  ASSERT_EQ(scored[1].size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_NEAR(scored[1][i], scored[0][i], 1e-5) << i;
}

TEST(PipelineParallelE2E, SftPp2Dp2GpipeFollowsPp1) {
  std::string dir = scratch_dir("pp-dp-sft");
  Proc one = run_hpcrl("run " + kSft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc four = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.pp_schedule=gpipe"
                        " --out " + dir + "/pp2dp2", 4);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  expect_follows(dir + "/pp1", dir + "/pp2dp2");
}

TEST(PipelineParallelE2E, SftInterleavedAndPp2Tp2FollowPp1) {
  // The 4-layer preset: pp=2 × 2 virtual stages (one layer per chunk) with the
  // interleaved schedule (4 micro-batches, a multiple of pp), and pp=2 × tp=2.
  const std::string sft = kSft + " --set models.policy.init.preset=tiny";
  std::string dir = scratch_dir("pp-sft-interleaved");
  Proc one = run_hpcrl("run " + sft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc inter = run_hpcrl("run " + sft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.pp_virtual=2"
                         " --set models.policy.parallel.pp_schedule=interleaved --out " + dir + "/interleaved", 2);
  ASSERT_EQ(inter.exit_code, 0) << inter.output;
  expect_follows(dir + "/pp1", dir + "/interleaved");
  Proc tp = run_hpcrl("run " + sft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.tp=2 --out " +
                      dir + "/pp2tp2", 4);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  expect_follows(dir + "/pp1", dir + "/pp2tp2");
}

TEST(PipelineParallelE2E, GrpoPp2MatchesPp1) {
  // A reward that differs between samples (the length of the judge's request
  // line, i.e. of the response), so advantages, the loss, the KL to the
  // pipelined reference and the gradients are all non-zero from iteration 1.
  std::string dir = scratch_dir("pp-grpo");
  const std::string yaml = dir + "/grpo.yaml";
  std::ofstream(yaml) << R"(run: {name: pp-grpo, seed: 3, eval_before_train: false,
      eval_sampling: {prompts: 16, max_new_tokens: 12}}
models:
  policy:    {init: {preset: tiny-2l}}
  reference: {init: {from: policy}, frozen: true}
rewards:
  judge: {type: command, command: 'while read -r line; do echo "{\"score\": ${#line}}"; done', timeout_s: 20}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, terms: 2, train: 200, eval: 16}}
stages:
  - grpo: {policy: policy, reference: reference, reward: judge, data: arith, iterations: 2, prompts: 8, group: 4,
           max_new_tokens: 24, temperature: 1.0, lr: 1.0e-3, micro_batch: 8, recompute_old_logprobs: true,
           kl: {coef: 0.05, estimator: k3}}
trace: {chrome: true, metrics: true, comm: true}
)";
  Proc one = run_hpcrl("run " + yaml + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // Policy and reference pipelined; rollouts come from the policy's pp=1 copy,
  // refreshed with the updated weights before iteration 2.
  Proc two = run_hpcrl("run " + yaml + " --set models.policy.parallel.pp=2 --set models.reference.parallel.pp=2 --out " +
                       dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto a = lines_with(read_metrics(dir + "/pp1/metrics.jsonl"), "grpo", "reward/mean");
  auto b = lines_with(read_metrics(dir + "/pp2/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_GT(a[0]["reward/std"].get<double>(), 0.0);
  EXPECT_GT(a[0]["grad_norm"].get<double>(), 0.0);
  EXPECT_GT(a[1]["kl"].get<double>(), 0.0);  // the policy moved away from the reference
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_EQ(a[i]["reward/mean"], b[i]["reward/mean"]);
    EXPECT_EQ(a[i]["response_len/mean"], b[i]["response_len/mean"]);
    expect_close({a[i]}, {b[i]}, "loss", 1e-5);
    expect_close({a[i]}, {b[i]}, "kl", 1e-4);
    expect_close({a[i]}, {b[i]}, "grad_norm", 1e-4);
  }
}

TEST(PipelineParallelE2E, PipelinedRoleOfAStageWithoutPipelineSupportIsRefused) {
  std::string dir = scratch_dir("pp-refused");
  Proc r = run_hpcrl("run " + kConfig + " --set models.student.parallel.pp=2 --out " + dir + "/run", 2);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("models.student.parallel.pp = 2, but stage stages[2].distill uses role 'student', and "
                          "pipeline parallelism runs only for the model of an sft stage and the policy and reference "
                          "of a grpo stage so far; use pp: 1 for this role"),
            std::string::npos)
      << r.output;
}
