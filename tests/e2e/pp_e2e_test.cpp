// End-to-end pipeline parallelism: `hpcrl run` with the trained role split
// over pp stages follows the single-rank run step by step (fp32), including
// the held-out evaluation (generation on the pp = 1 rollout copy) and the
// saved checkpoint, also with sp × pp and, for a MoE model, ep × pp; GRPO and
// PPO runs whose every role is pipelined (policy, reference, critic) and a
// distillation with a pipelined teacher and student match the single-rank
// run; ZeRO-1, 2 and 3 at pp 2 × dp 2 follow plain pp (SFT with an exact
// resume, PPO); `hpcrl eval --pp` equals one rank; what stays unsupported is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";

// The SFT runs' optimizer steps: written into their configs (kSft, the MoE
// test's YAML) and the number of loss lines expect_follows requires.
constexpr int kSftSteps = 8;

// SFT of tiny-2l (2 layers: one per stage at pp=2) with 4 micro-batches per rank and step.
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: " +
                         std::to_string(kSftSteps) + ", batch: 16, lr: 3.0e-3, "
                         "micro_batch: 4}}]' --set run.eval_before_train=false"
                         " --set run.eval_sampling.prompts=16 --set run.eval_sampling.max_new_tokens=12";

// `other`'s SFT run follows `base`'s: `steps` loss lines each, equal step by step.
void expect_follows(const std::string& base, const std::string& other, size_t steps) {
  auto a = read_metrics(base + "/metrics.jsonl"), b = read_metrics(other + "/metrics.jsonl");
  auto la = lines_with(a, "sft", "loss"), lb = lines_with(b, "sft", "loss");
  ASSERT_EQ(la.size(), steps);
  expect_close_curves(la, lb, "loss", 1e-5);
  expect_close_curves(la, lb, "grad_norm", 1e-4);
  // The stage-end evaluation: teacher-forced loss through the pipeline, greedy
  // answers from the rollout copy (same weights, so the same answers).
  auto ea = lines_with(a, "sft", "eval/loss"), eb = lines_with(b, "sft", "eval/loss");
  ASSERT_EQ(ea.size(), 1u);
  expect_close_curves(ea, eb, "eval/loss", 1e-5);
  EXPECT_EQ(ea[0]["eval/accuracy"], eb[0]["eval/accuracy"]);
  EXPECT_EQ(ea[0]["eval/response_len"], eb[0]["eval/response_len"]);
}

// The log-probs that an SFT run's last checkpoint gives one sequence (`hpcrl score`): 7 values.
std::vector<double> score_last_checkpoint(const std::string& run) {
  char last_step[32];
  std::snprintf(last_step, sizeof last_step, "step-%06d", kSftSteps);
  Proc where = run_shell("ls -d " + run + "/checkpoints/*sft/" + last_step + "/policy");
  EXPECT_EQ(where.exit_code, 0) << where.output;
  Proc score = run_hpcrl("score --model " + where.output.substr(0, where.output.find('\n')) +
                         " --ids 1,50,51,43,52,61,10,60 --json");
  EXPECT_EQ(score.exit_code, 0) << score.output;
  if (score.exit_code != 0) return {};
  return nlohmann::json::parse(score.output.substr(score.output.rfind("{\"ids\""))).at("logprobs").get<std::vector<double>>();
}
}  // namespace

TEST(PipelineParallelE2E, SftPp2FollowsPp1) {
  std::string dir = scratch_dir("pp-sft");
  Proc one = run_hpcrl("run " + kSft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --out " + dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_follows(dir + "/pp1", dir + "/pp2", kSftSteps);
  // `trace summarize` reports each stage's bubble next to the 1F1B theory for
  // p = 2 and m = 16 rows / micro_batch 4 = 4 micro-batches: 1/5.
  Proc sum = run_hpcrl("trace summarize " + dir + "/pp2");
  ASSERT_EQ(sum.exit_code, 0) << sum.output;
  EXPECT_NE(sum.output.find("## Pipeline bubble"), std::string::npos) << sum.output;
  // Rows: | pp stage | ranks | steps | p | m | v | ...
  const std::string steps = std::to_string(kSftSteps);
  for (const std::string& row : {"| 0 | 1 | " + steps + " | 2 | 4 | 1 | ", "| 1 | 1 | " + steps + " | 2 | 4 | 1 | "}) {
    auto at = sum.output.find(row);
    ASSERT_NE(at, std::string::npos) << row << "\n" << sum.output;
    const std::string line = sum.output.substr(at, sum.output.find('\n', at) - at);
    EXPECT_EQ(line.substr(line.size() - 9), "| 0.200 |") << line;
  }
  // The pipelined run's last checkpoint is an ordinary full HF model with the
  // pp=1 run's weights: both score a sequence the same.
  const std::vector<double> one_rank = score_last_checkpoint(dir + "/pp1"), pipelined = score_last_checkpoint(dir + "/pp2");
  ASSERT_EQ(one_rank.size(), 7u);
  ASSERT_EQ(pipelined.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_NEAR(pipelined[i], one_rank[i], 1e-5) << i;
}

TEST(PipelineParallelE2E, SftPp2Dp2GpipeFollowsPp1) {
  std::string dir = scratch_dir("pp-dp-sft");
  Proc one = run_hpcrl("run " + kSft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc four = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.pp_schedule=gpipe"
                        " --out " + dir + "/pp2dp2", 4);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  expect_follows(dir + "/pp1", dir + "/pp2dp2", kSftSteps);
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
  expect_follows(dir + "/pp1", dir + "/interleaved", kSftSteps);
  Proc tp = run_hpcrl("run " + sft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.tp=2 --out " +
                      dir + "/pp2tp2", 4);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  expect_follows(dir + "/pp1", dir + "/pp2tp2", kSftSteps);
}

TEST(PipelineParallelE2E, GrpoPp2MatchesPp1) {
  // A reward that differs between samples (the length of the judge's request
  // line, i.e. of the response), so advantages, the loss, the KL to the
  // pipelined reference and the gradients are all non-zero from iteration 1.
  std::string dir = scratch_dir("pp-grpo");
  const std::string yaml = "tests/e2e/data/grpo_judge.yaml";
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
  expect_same_rollouts(a, b, {{"loss", 1e-5}, {"kl", 1e-4}, {"grad_norm", 1e-4}});
}

TEST(PipelineParallelE2E, PpoPp2MatchesPp1) {
  // Policy, reference and critic all pipelined (2 layers: one per stage). A
  // small reward that differs between samples (the judge's request line length
  // mod 7), two epochs over two mini-batches of two micro-batches each, so the
  // value clipping, the critic's pipelined micro-batches and its optimizer
  // steps all matter; the critic moves, so iteration 2's values differ.
  std::string dir = scratch_dir("pp-ppo");
  const std::string yaml = "tests/e2e/data/ppo_judge.yaml";
  Proc one = run_hpcrl("run " + yaml + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string pp2 = " --set models.policy.parallel.pp=2 --set models.reference.parallel.pp=2"
                         " --set models.critic.parallel.pp=2";
  Proc two = run_hpcrl("run " + yaml + pp2 + " --out " + dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("role critic: pipeline"), std::string::npos) << "the critic runs pipelined: " << two.output;
  auto a = lines_with(read_metrics(dir + "/pp1/metrics.jsonl"), "ppo", "critic/loss");
  auto b = lines_with(read_metrics(dir + "/pp2/metrics.jsonl"), "ppo", "critic/loss");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_GT(a[0]["reward/std"].get<double>(), 0.0);
  EXPECT_GT(a[0]["critic/loss"].get<double>(), 0.0);
  EXPECT_GT(a[0]["critic/clip_frac"].get<double>() + a[1]["critic/clip_frac"].get<double>(), 0.0);
  EXPECT_NE(a[0]["critic/values_mean"], a[1]["critic/values_mean"]);  // the critic was trained
  EXPECT_GT(a[1]["kl"].get<double>(), 0.0);
  expect_same_rollouts(a, b, {{"critic/values_mean", 1e-5}, {"critic/loss", 1e-5}, {"critic/clip_frac", 1e-6},
                             {"loss", 1e-5}, {"kl", 1e-4}, {"grad_norm", 1e-4}});
}

TEST(PipelineParallelE2E, DistillPp2MatchesPp1) {
  // Top-k distillation (teacher forward-only through its pipeline, the top-k
  // broadcast from its last stage; the student trained through its pipeline),
  // two micro-batches per step; then a teacher with a different pp than the
  // student (teacher pp=2, student tp=2).
  const std::string cfg = kConfig + " --set 'stages=[{distill: {teacher: policy, student: student, data: arith, "
                          "steps: 4, batch: 8, lr: 3.0e-3, top_k: 16, micro_batch: 4}}]'"
                          " --set run.eval_before_train=false --set run.eval_sampling.prompts=8"
                          " --set run.eval_sampling.max_new_tokens=12";
  std::string dir = scratch_dir("pp-distill");
  Proc one = run_hpcrl("run " + cfg + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + cfg + " --set models.policy.parallel.pp=2 --set models.student.parallel.pp=2 --out " +
                       dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  Proc mixed = run_hpcrl("run " + cfg + " --set models.policy.parallel.pp=2 --set models.student.parallel.tp=2 --out " +
                         dir + "/mixed", 2);
  ASSERT_EQ(mixed.exit_code, 0) << mixed.output;
  auto a = lines_with(read_metrics(dir + "/pp1/metrics.jsonl"), "distill", "loss");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_GT(a[0]["loss"].get<double>(), 0.0);
  for (const char* run : {"/pp2", "/mixed"}) {
    SCOPED_TRACE(run);
    auto b = lines_with(read_metrics(dir + run + "/metrics.jsonl"), "distill", "loss");
    // Step 1 (same weights) to fp32 round-off; later steps drift a little
    // further, as Adam's first updates turn round-off-sized gradients into
    // lr-sized steps (the tp=2 student, a path pp does not touch, drifts alike).
    expect_close_curves({a[0]}, {b[0]}, "loss", 1e-6);
    expect_close_curves({a[0]}, {b[0]}, "grad_norm", 1e-6);
    expect_close_curves(a, b, "loss", 1e-4);
    expect_close_curves(a, b, "grad_norm", 1e-4);
  }
}

TEST(PipelineParallelE2E, SftSp2Pp2FollowsPp1) {
  // 4 ranks: each pipeline stage is a sequence-parallel pair ([B, T/2, C] activations).
  std::string dir = scratch_dir("pp-sp-sft");
  Proc one = run_hpcrl("run " + kSft + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc four = run_hpcrl("run " + kSft + " --set models.policy.parallel.pp=2 --set models.policy.parallel.sp=2 --out " +
                        dir + "/sp2pp2", 4);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("sp=2 ep=1 dp=1 pp=2"), std::string::npos) << four.output;
  expect_follows(dir + "/pp1", dir + "/sp2pp2", kSftSteps);
}

namespace {
// A random 2-layer Mixtral-family MoE (4 experts, top-2, tied embeddings,
// byte vocabulary) as an HF directory: config.json and model.safetensors in
// float32, weights uniform in ±0.035 from a fixed LCG, norms 1.
void write_moe_model(const std::string& dir, double aux_coef) {
  const int64_t V = 272, C = 64, I = 96, L = 2, H = 4, KV = 2, E = 4, D = C / H;
  nlohmann::json cfg = {{"model_type", "mixtral"}, {"vocab_size", V}, {"hidden_size", C}, {"intermediate_size", I},
                        {"num_hidden_layers", L}, {"num_attention_heads", H}, {"num_key_value_heads", KV},
                        {"max_position_embeddings", 512}, {"rope_theta", 10000.0}, {"rms_norm_eps", 1e-5},
                        {"tie_word_embeddings", true}, {"num_local_experts", E}, {"num_experts_per_tok", 2},
                        {"router_aux_loss_coef", aux_coef}};
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes{{"model.embed_tokens.weight", {V, C}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) shapes.push_back({p + n, {C}});
    shapes.push_back({p + "self_attn.q_proj.weight", {H * D, C}});
    shapes.push_back({p + "self_attn.k_proj.weight", {KV * D, C}});
    shapes.push_back({p + "self_attn.v_proj.weight", {KV * D, C}});
    shapes.push_back({p + "self_attn.o_proj.weight", {C, H * D}});
    shapes.push_back({p + "block_sparse_moe.gate.weight", {E, C}});
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
      shapes.push_back({q + "w1.weight", {I, C}});
      shapes.push_back({q + "w3.weight", {I, C}});
      shapes.push_back({q + "w2.weight", {C, I}});
    }
  }
  shapes.push_back({"model.norm.weight", {C}});
  nlohmann::json header = nlohmann::json::object();
  std::vector<float> data;
  uint64_t state = 5;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const bool norm = name.find("norm.weight") != std::string::npos;
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size() * 4, (data.size() + n) * 4}}};
    for (int64_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      data.push_back(norm ? 1.0f : (float((state >> 40) & 0xFFFFFF) / float(1 << 24) - 0.5f) * 0.07f);
    }
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t len = h.size();  // little-endian on every machine this runs on
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), std::streamsize(h.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
  std::ofstream(dir + "/config.json") << cfg.dump(2);
}
// The MoE above in DIR/moe and an SFT of it in DIR/moe.yaml (returned): `run`
// continues the run mapping after its name, `policy` the policy's after its
// tokenizer.
std::string write_moe_sft(const std::string& dir, const std::string& run, const std::string& policy) {
  EXPECT_EQ(run_shell("mkdir -p " + dir + "/moe").exit_code, 0);
  write_moe_model(dir + "/moe", 0.02);
  const std::string yaml = dir + "/moe.yaml";
  std::ofstream(yaml) << "run: {name: " + run + ", seed: 3, eval_before_train: false}\n"
                         "models:\n  policy: {init: {path: " + dir + "/moe}, tokenizer: byte" + policy + "}\n"
                         "data:\n  arith: {synthetic: {task: arithmetic, digits: 2, terms: 2, train: 200, eval: 16}}\n"
                         "stages:\n  - sft: {model: policy, data: arith, steps: " + std::to_string(kSftSteps) +
                         ", batch: 16, lr: 3.0e-3, micro_batch: 4}\n"
                         "trace: {metrics: true}\n";
  return yaml;
}
}  // namespace

TEST(PipelineParallelE2E, MoeSftEp2Pp2FollowsOneRank) {
  // 4 ranks: pp=2 × dp=2 with the 4 experts split over ep=2 inside each
  // stage, the router's aux loss on (each micro-batch's aux share flows back
  // through its own stage). dp=2 with micro-batches of 4 rows sees the same
  // micro-batches as one rank, so even the aux-loss gradient is the one-rank one.
  std::string dir = scratch_dir("pp-ep-sft");
  const std::string yaml = write_moe_sft(dir, "pp-ep, eval_sampling: {prompts: 16, max_new_tokens: 12}", "");
  Proc one = run_hpcrl("run " + yaml + " --out " + dir + "/pp1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc four = run_hpcrl("run " + yaml + " --set models.policy.parallel.pp=2 --set models.policy.parallel.ep=2 --out " +
                        dir + "/ep2pp2", 4);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("ep=2 dp=2 pp=2"), std::string::npos) << four.output;
  expect_follows(dir + "/pp1", dir + "/ep2pp2", kSftSteps);
}

TEST(PipelineParallelE2E, MoeEp2Zero2ResumesAtHalfTheDpSize) {
  // ZeRO-2 over the dense dp group (4 ranks) and each expert group's edp
  // replicas (2), saved at step 4 and resumed on 2 ranks (dense group 2, edp 1):
  // both groups' shards are recut, and the curve is the 4-rank run's.
  std::string dir = scratch_dir("ep-reshard");
  const std::string yaml = write_moe_sft(dir, "ep-reshard, checkpoint_every: 4, keep_last: 4",
                                         ", parallel: {ep: 2}, optim: {zero: 2}");
  Proc four = run_hpcrl("run " + yaml + " --out " + dir + "/run", 4);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  auto full = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(full.size(), size_t(kSftSteps));
  ASSERT_NO_FATAL_FAILURE(back_to_checkpoint(dir + "/run", "00-sft", 4));
  Proc two = run_hpcrl("run " + yaml + " --out " + dir + "/run --resume", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("ep=2 dp=2 pp=1"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("optimizer state saved at dp 4 recut for dp 2"), std::string::npos) << two.output;
  auto resumed = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(resumed.size(), size_t(kSftSteps));
  expect_close_curves(full, resumed, "loss", 1e-6);
  expect_close_curves(full, resumed, "grad_norm", 1e-5);
}

TEST(PipelineParallelE2E, EvalPp2EqualsPp1) {
  // Sampled answers of a random model to one-digit sums: a few are right by
  // chance (so accuracy is not trivially 0), and --pp 2 (a whole copy gathered
  // from the stages decodes) must draw exactly the same samples, also with
  // pp=2 × dp=2 giving each replica two of the four batches (sampling seeds
  // follow the batch's first example, so the batches are the same).
  const std::string args = "eval --model preset:tiny --data synthetic:digits=1,terms=2,eval=16 --max-new-tokens 16 "
                           "--n 4 --temperature 1.0 --seed 5 --batch 4 --json";
  auto doc = [](const Proc& p) {  // the one-line report; another rank's log line may follow it in the output
    const size_t start = p.output.rfind("{\"model\"");
    return nlohmann::json::parse(p.output.substr(start, p.output.find('\n', start) - start));
  };
  Proc one = run_hpcrl(args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const nlohmann::json a = doc(one);
  EXPECT_GT(a["correct"].get<int64_t>(), 0) << one.output;
  for (int np : {2, 4}) {
    SCOPED_TRACE("--pp 2 on " + std::to_string(np) + " ranks");
    Proc pp = run_hpcrl(args + " --pp 2", np);
    ASSERT_EQ(pp.exit_code, 0) << pp.output;
    const nlohmann::json b = doc(pp);
    EXPECT_EQ(b["correct"], a["correct"]);
    EXPECT_EQ(b["pass_at_k"], a["pass_at_k"]);
    EXPECT_EQ(b["mean_response_len"], a["mean_response_len"]);
  }
}

TEST(PipelineParallelE2E, APipelinedRewardModelScoresAsTheSameModelAtTp2) {
  // Policy pp = 2 on 2 ranks (dp = 1); the reward model, snapshotted from it, at pp = 2 or at tp = 2.
  std::string dir = scratch_dir("pp-rm");
  const std::string yaml = dir + "/rm.yaml";
  std::ofstream(yaml) << R"(run: {name: pp-rm, seed: 3, eval_before_train: false}
models:
  policy: {init: {preset: tiny-2l}, parallel: {pp: 2}}
  rm:     {init: {from: policy}, head: value, parallel: {pp: 2}}
rewards:
  math: {type: verifiable}
  rm:   {type: model, model: rm}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, terms: 2, train: 200, eval: 16}}
stages:
  - grpo: {policy: policy, reward: [math, rm], data: arith, iterations: 2, prompts: 4, group: 2, max_new_tokens: 12}
)";
  Proc pp = run_hpcrl("run " + yaml + " --out " + dir + "/pp", 2);
  ASSERT_EQ(pp.exit_code, 0) << pp.output;
  Proc tp = run_hpcrl("run " + yaml + " --set models.rm.parallel='{tp: 2}' --out " + dir + "/tp", 2);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  const auto a = lines_with(read_metrics(dir + "/pp/metrics.jsonl"), "grpo", "reward/mean");
  const auto b = lines_with(read_metrics(dir + "/tp/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].at("reward/mean").get<double>(), b[i].at("reward/mean").get<double>(), 1e-5) << "iteration " << i;
    EXPECT_NEAR(a[i].at("reward/std").get<double>(), b[i].at("reward/std").get<double>(), 1e-5) << "iteration " << i;
  }
}

TEST(PipelineParallelE2E, SftPp2Dp2ZeroFollowsPlainAndResumes) {
  // pp 2 × dp 2, tied embeddings: ZeRO-1 reduce-scatters after the schedule
  // (the tied sum on full gradients first); ZeRO-2 and ZeRO-3 reduce-scatter every
  // backward of the 1F1B schedule and sum the tied embedding over the first
  // and last stage's shards; ZeRO-3 gathers each stage's layers per micro-batch.
  const std::string cfg = kSft + " --set models.policy.parallel.pp=2 --set run.checkpoint_every=4 --set run.keep_last=4";
  std::string dir = scratch_dir("pp-zero");
  for (const std::string zero : {"0", "1", "2", "3"}) {
    Proc run = run_hpcrl("run " + cfg + " --set models.policy.optim.zero=" + zero + " --out " + dir + "/zero" + zero, 4);
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  expect_follows(dir + "/zero0", dir + "/zero1", kSftSteps);
  expect_follows(dir + "/zero0", dir + "/zero2", kSftSteps);
  expect_follows(dir + "/zero0", dir + "/zero3", kSftSteps);
  // The ZeRO-3 checkpoint (every stage's units gathered one at a time) is the plain run's model.
  const std::vector<double> plain = score_last_checkpoint(dir + "/zero0"), zero3 = score_last_checkpoint(dir + "/zero3");
  ASSERT_EQ(plain.size(), 7u);
  ASSERT_EQ(zero3.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_NEAR(zero3[i], plain[i], 1e-5) << i;
  // Back to step 4: the resumed run writes every metrics line again, equal but for timing.
  const auto full = read_metrics(dir + "/zero3/metrics.jsonl");
  const std::string stage = dir + "/zero3/checkpoints/00-sft";
  ASSERT_TRUE(std::filesystem::exists(stage + "/step-000004/policy/optimizer-rank-00003.safetensors"));
  std::filesystem::remove_all(stage + "/step-000008");
  std::filesystem::remove(stage + "/complete.json");
  Proc resumed = run_hpcrl("run " + cfg + " --set models.policy.optim.zero=3 --out " + dir + "/zero3 --resume", 4);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto again = read_metrics(dir + "/zero3/metrics.jsonl");
  ASSERT_EQ(again.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(without_timing(full[i]), without_timing(again[i])) << "line " << i;
}

TEST(PipelineParallelE2E, PpoPp2Dp2Zero3FollowsPlain) {
  // Policy and critic trained with ZeRO-3 at pp 2 × dp 2 (the reference
  // pipelined too): rollouts from the policy's whole copy gathered from its shards.
  const std::string cfg = "tests/e2e/data/ppo_judge.yaml --set models.policy.parallel.pp=2"
                          " --set models.reference.parallel.pp=2 --set models.critic.parallel.pp=2";
  auto [a, b] = run_twice(cfg, "pp-ppo-zero3", 4, " --set models.policy.optim.zero=3 --set models.critic.optim.zero=3",
                          4, "ppo", "critic/loss");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(a[0]["critic/values_mean"], a[1]["critic/values_mean"]);  // the critic was trained
  expect_same_rollouts(a, b, {{"critic/values_mean", 1e-5}, {"critic/loss", 1e-5}, {"critic/clip_frac", 1e-6},
                             {"loss", 1e-5}, {"kl", 1e-4}, {"grad_norm", 1e-4}});
}

TEST(PipelineParallelE2E, MismatchedRowsAreRefused) {
  std::string dir = scratch_dir("pp-refused");
  // A teacher with pp=2 over 4 ranks (dp=2) next to a student with pp=1, tp=2
  // (dp=2): the dp ranks interleave differently, so a teacher stage pair would
  // hold two different students' rows.
  Proc rows = run_hpcrl("run " + kConfig + " --set 'stages=[{distill: {teacher: policy, student: student, data: arith, "
                        "steps: 1, batch: 8, top_k: 16}}]' --set models.policy.parallel.pp=2 "
                        "--set models.student.parallel.tp=2 --out " + dir + "/rows", 4);
  EXPECT_EQ(rows.exit_code, 2) << rows.output;
  EXPECT_NE(rows.output.find("stages[0].distill: ranks 0 and 2 form one replica of role 'policy' (its data-parallel "
                             "rank 0) but hold different rows of role 'student' (its data-parallel ranks 0 and 1), "
                             "which 'policy' has to process together; give 'policy' (pp=2) the same pp as 'student' "
                             "(pp=1; pp is the outermost mesh dimension), or dp = 1"),
            std::string::npos)
      << rows.output;
}
