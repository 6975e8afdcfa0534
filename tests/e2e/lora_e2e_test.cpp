// LoRA end to end: an SFT run trains only the adapter (the saved base stays
// bit-identical, the optimizer holds only factors), writes PEFT files and a
// merged model that `hpcrl score` scores like base + adapter, resumes exactly,
// and follows the one-rank run at dp 2, tp 2 and pp 2 (also interleaved, with
// ZeRO-3, and resumed); PPO with adapters on a pipelined policy and critic
// follows one rank; a GRPO reference made from a
// LoRA policy is the policy's base (no copy) and gives what a copy gives; and
// generation on ranks of its own, fed merged weights, follows colocated GRPO.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hpcrl/io/tensor_store.h"
#include "run_util.h"

using namespace hpcrl::test;

namespace {

const std::string kConfig = "tests/e2e/data/tiny.yaml";
const std::string kLora = " --set 'models.policy.lora={rank: 4, alpha: 8, targets: [q_proj, v_proj, o_proj, up_proj, "
                          "down_proj], save_merged: true}'";

std::string sft(int steps) {
  return kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: " + std::to_string(steps) +
         ", batch: 16, lr: 1.0e-2, micro_batch: 4}}]' --set run.eval_before_train=false" + kLora;
}

// Whether two safetensors files hold the same names and tensors within `tol` (0: bit-identical).
bool close_tensors(const std::string& a, const std::string& b, double tol) {
  hpcrl::io::TensorStore x(a), y(b);
  if (x.names() != y.names()) return false;
  for (const auto& n : x.names())
    if (!x.load_tensor(n).allclose(y.load_tensor(n), /*rtol=*/0, /*atol=*/tol)) return false;
  return true;
}

// Whether two safetensors files hold the same names and bit-identical tensors.
bool same_tensors(const std::string& a, const std::string& b) {
  hpcrl::io::TensorStore x(a), y(b);
  if (x.names() != y.names()) return false;
  for (const auto& n : x.names())
    if (!x.load_tensor(n).equal(y.load_tensor(n))) return false;
  return true;
}

struct Layout {
  std::string name, args;  // the run directory's name, the --set flags
  int ranks;
};

// `cfg` run on one rank (DIR/one) and in each of `layouts` (DIR/NAME): the loss
// within 1e-5 and the gradient norm within 1e-4 of the one-rank run, step by step.
void expect_layouts_follow_one_rank(const std::string& cfg, const std::string& dir, const std::vector<Layout>& layouts) {
  Proc one = run_hpcrl("run " + cfg + " --out " + dir + "/one");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto a = lines_with(read_metrics(dir + "/one/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(a.size(), 6u);
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    Proc run = run_hpcrl("run " + cfg + l.args + " --out " + dir + "/" + l.name, l.ranks);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto b = lines_with(read_metrics(dir + "/" + l.name + "/metrics.jsonl"), "sft", "loss");
    expect_close_curves(a, b, "loss", 1e-5);
    expect_close_curves(a, b, "grad_norm", 1e-4);
  }
}

std::vector<double> score_json(const std::string& args) {
  Proc p = run_hpcrl("score " + args + " --ids 1,20,33,47,60,72,90,101 --json");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  const auto start = p.output.find('{');
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(p.output.substr(start))["logprobs"].get<std::vector<double>>();
}

TEST(LoraE2E, SftTrainsOnlyTheAdapterExportsPeftAndMergedAndResumesExactly) {
  const std::string dir = scratch_dir("lora-sft");
  const std::string cfg = sft(6) + " --set run.checkpoint_every=3 --set run.keep_last=4 --out " + dir;
  Proc run = run_hpcrl("run " + cfg);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("role policy: LoRA rank 4 alpha 8"), std::string::npos) << run.output;
  auto loss = lines_with(read_metrics(dir + "/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_LT(loss.back()["loss"].get<double>(), loss.front()["loss"].get<double>());

  const std::string s3 = dir + "/checkpoints/00-sft/step-000003/policy", s6 = dir + "/checkpoints/00-sft/step-000006/policy";
  EXPECT_TRUE(same_tensors(s3 + "/model.safetensors", s6 + "/model.safetensors")) << "the frozen base changed";
  EXPECT_FALSE(same_tensors(s3 + "/adapter_model.safetensors", s6 + "/adapter_model.safetensors"));
  hpcrl::io::TensorStore opt(s6 + "/optimizer-rank-00000.safetensors");
  ASSERT_FALSE(opt.names().empty());
  for (const auto& n : opt.names())
    if (n != "step" && n != "replica") EXPECT_NE(n.find(".lora_"), std::string::npos) << "optimizer state for " << n;
  ASSERT_TRUE(std::filesystem::exists(s6 + "/adapter_config.json"));
  ASSERT_TRUE(std::filesystem::exists(s6 + "/merged/config.json"));

  // The merged export is a plain HF model that scores like base + adapter.
  const std::vector<double> merged = score_json("--model " + s6 + "/merged");
  const std::vector<double> adapted = score_json("--model " + s6 + " --adapter " + s6);
  const std::vector<double> base = score_json("--model " + s6);
  ASSERT_EQ(merged.size(), 7u);
  ASSERT_EQ(adapted.size(), 7u);
  double moved = 0;
  for (size_t i = 0; i < merged.size(); ++i) {
    EXPECT_NEAR(merged[i], adapted[i], 1e-4) << "token " << i;
    moved = std::max(moved, std::abs(merged[i] - base[i]));
  }
  EXPECT_GT(moved, 1e-3) << "the adapter did not change the model";
  Proc bare = run_hpcrl("score --model " + s6 + " --ids 1,20,33");  // the base alone: said so
  EXPECT_NE(bare.output.find("holds a LoRA adapter (adapter_config.json) beside its frozen base"), std::string::npos)
      << bare.output;

  // Resume from step 3: the same curve, bit for bit.
  expect_exact_resume(cfg, dir, "00-sft", 3);

  // Without lora the adapter in the checkpoint is not silently dropped: the resume names the change.
  back_to_checkpoint(dir, "00-sft", 3);
  Proc plain = run_hpcrl("run " + kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 6, batch: 16, "
                         "lr: 1.0e-2, micro_batch: 4}}]' --set run.eval_before_train=false --set run.checkpoint_every=3"
                         " --set run.keep_last=4 --out " + dir + " --resume");
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("models.policy.lora.rank (saved 4, now (absent))"), std::string::npos) << plain.output;
}

TEST(LoraE2E, SftAtDp2AndTp2FollowsOneRank) {
  expect_layouts_follow_one_rank(sft(6), scratch_dir("lora-layouts"),
                                 {{"dp2", "", 2}, {"tp2", " --set models.policy.parallel.tp=2", 2}});
}

TEST(LoraE2E, SftAtPp2FollowsOneRankSavesItsFilesAndResumesExactly) {
  // Each pp stage adapts its own layers; the checkpoint gathers the stages'
  // adapters, bases and merged weights into the one-rank run's files. The tied
  // embedding is frozen, so ZeRO-3 at pp 2 × dp 2 has no embedding gradient to
  // sum between the first and the last stage.
  const std::string dir = scratch_dir("lora-pp");
  const std::string cfg = sft(6) + " --set run.checkpoint_every=3 --set run.keep_last=4";
  const std::string pp2 = " --set models.policy.parallel.pp=2";
  expect_layouts_follow_one_rank(cfg, dir, {{"pp2", pp2, 2}, {"zero3", pp2 + " --set models.policy.optim.zero=3", 4}});
  const std::string s1 = dir + "/one/checkpoints/00-sft/step-000006/policy/";
  for (const std::string run : {"pp2", "zero3"}) {
    const std::string s = dir + "/" + run + "/checkpoints/00-sft/step-000006/policy/";
    EXPECT_TRUE(same_tensors(s1 + "model.safetensors", s + "model.safetensors")) << run << ": not the same base";
    EXPECT_TRUE(close_tensors(s1 + "adapter_model.safetensors", s + "adapter_model.safetensors", 1e-5)) << run;
    EXPECT_TRUE(close_tensors(s1 + "merged/model.safetensors", s + "merged/model.safetensors", 1e-5)) << run;
  }

  // Resume the pp 2 run from step 3: the same curve, bit for bit.
  expect_exact_resume(cfg + pp2 + " --out " + dir + "/pp2", dir + "/pp2", "00-sft", 3, 2);
}

TEST(LoraE2E, SftInterleavedPp2FollowsOneRank) {
  // The 4-layer preset: pp 2 × 2 virtual stages, one adapted layer per chunk.
  expect_layouts_follow_one_rank(sft(6) + " --set models.policy.init.preset=tiny", scratch_dir("lora-pp-interleaved"),
                                 {{"interleaved", " --set models.policy.parallel.pp=2 --set models.policy.parallel."
                                   "pp_virtual=2 --set models.policy.parallel.pp_schedule=interleaved", 2}});
}

TEST(LoraE2E, PpoWithAdaptedPolicyAndCriticAtPp2FollowsOneRank) {
  // Policy, reference and critic pipelined; the reference is the policy's base
  // (its stages' adapters bypassed, no copy); the critic trains its adapters and
  // its value head on the last stage; generation runs on a merged pp = 1 copy.
  const std::string ppo = "tests/e2e/data/ppo_judge.yaml --set 'models.policy.lora={rank: 4, alpha: 8, targets: "
                          "[q_proj, v_proj]}' --set 'models.critic.lora={rank: 4, alpha: 8, targets: [q_proj, v_proj, "
                          "up_proj]}'";
  const std::string dir = scratch_dir("lora-ppo-pp");
  Proc one = run_hpcrl("run " + ppo + " --out " + dir + "/one");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Proc two = run_hpcrl("run " + ppo + " --set models.policy.parallel.pp=2 --set models.reference.parallel.pp=2"
                       " --set models.critic.parallel.pp=2 --out " + dir + "/pp2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("role reference: the frozen base of role policy (its LoRA adapters bypassed), no copy"),
            std::string::npos) << two.output;
  EXPECT_NE(two.output.find("role critic: pipeline"), std::string::npos) << two.output;
  auto a = lines_with(read_metrics(dir + "/one/metrics.jsonl"), "ppo", "critic/loss");
  auto b = lines_with(read_metrics(dir + "/pp2/metrics.jsonl"), "ppo", "critic/loss");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0]["critic/values_mean"], a[1]["critic/values_mean"]);  // the critic's adapters were trained
  EXPECT_GT(a[1]["kl"].get<double>(), 0.0);                            // and the policy's
  expect_same_rollouts(a, b, {{"critic/values_mean", 1e-5}, {"critic/loss", 1e-5}, {"loss", 1e-5}, {"kl", 1e-4},
                             {"grad_norm", 1e-4}});
}

TEST(LoraE2E, Zero3ShardsTheBaseAndFollowsPlainDp2) {
  // optim.zero 3 with LoRA: the adapters' optimizer state and gradients sharded
  // as always, and the frozen base sharded and gathered layer by layer too. The
  // run follows plain dp 2, and its checkpoints hold the same, unchanged base.
  const std::string dir = scratch_dir("lora-zero3");
  const std::string cfg = sft(6) + " --set run.checkpoint_every=3 --set run.keep_last=4";
  Proc plain = run_hpcrl("run " + cfg + " --out " + dir + "/plain", 2);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  Proc zero3 = run_hpcrl("run " + cfg + " --set models.policy.optim.zero=3 --out " + dir + "/zero3", 2);
  ASSERT_EQ(zero3.exit_code, 0) << zero3.output;
  auto a = lines_with(read_metrics(dir + "/plain/metrics.jsonl"), "sft", "loss");
  auto b = lines_with(read_metrics(dir + "/zero3/metrics.jsonl"), "sft", "loss");
  ASSERT_EQ(a.size(), 6u);
  expect_close_curves(a, b, "loss", 1e-5);
  expect_close_curves(a, b, "grad_norm", 1e-4);
  const std::string p6 = dir + "/plain/checkpoints/00-sft/step-000006/policy";
  const std::string z3 = dir + "/zero3/checkpoints/00-sft/step-000003/policy";
  const std::string z6 = dir + "/zero3/checkpoints/00-sft/step-000006/policy";
  EXPECT_TRUE(same_tensors(z3 + "/model.safetensors", z6 + "/model.safetensors")) << "the frozen base changed";
  EXPECT_TRUE(same_tensors(p6 + "/model.safetensors", z6 + "/model.safetensors")) << "not the plain run's base";
  // The merged exports of both runs score alike (adapters within the runs' rounding).
  const std::vector<double> x = score_json("--model " + p6 + "/merged"), y = score_json("--model " + z6 + "/merged");
  ASSERT_EQ(x.size(), 7u);
  ASSERT_EQ(y.size(), 7u);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << "token " << i;
}

TEST(LoraE2E, GrpoReferenceIsThePolicyBaseWithoutACopy) {
  // Shared: the reference (made from the policy, listed after it) runs the policy's model
  // with its adapters bypassed. Copied: listed before the policy, the reference is built
  // on its own and snapshots the policy at the stage start, which with B = 0 is the same
  // base. The policy is the second role in both, so it gets the same seeded weights.
  // A dense reward the untrained policy can move on (shorter responses score higher) and a
  // KL term, so the policy leaves its base and the reference's log-probs matter.
  const std::string dir = scratch_dir("lora-grpo");
  std::ofstream(dir + "/judge.sh") << R"(while IFS= read -r line; do echo "{\"score\": -${#line}e-2}"; done)" << "\n";
  const std::string judged = write_tiny_config_with(
      dir + "/judge.yaml", {{"  math: {type: verifiable}\n", "  math: {type: verifiable}\n  judge: {type: command, "
                                                              "command: 'sh " + dir + "/judge.sh', timeout_s: 20}\n"}});
  const std::string grpo = judged +
                           " --set 'stages=[{grpo: {policy: policy, reference: reference, reward: judge, data: arith, "
                           "iterations: 3, prompts: 8, group: 4, max_new_tokens: 24, lr: 1.0e-2, micro_batch: 8, "
                           "kl: {coef: 0.05, estimator: k3}}}]' --set run.eval_before_train=false";
  const std::string policy = "policy: {init: {preset: tiny-2l}}", student = "student: {init: {preset: tiny-2l}}",
                    reference = "reference: {init: {from: policy}, frozen: true}";
  Proc shared = run_hpcrl("run " + grpo + " --set 'models={" + student + ", " + policy + ", " + reference + "}'" +
                          kLora + " --out " + dir + "/shared");
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  EXPECT_NE(shared.output.find("role reference: the frozen base of role policy (its LoRA adapters bypassed), no copy"),
            std::string::npos) << shared.output;
  Proc copied = run_hpcrl("run " + grpo + " --set 'models={" + reference + ", " + policy + ", " + student + "}'" +
                          kLora + " --out " + dir + "/copied");
  ASSERT_EQ(copied.exit_code, 0) << copied.output;
  EXPECT_EQ(copied.output.find("no copy"), std::string::npos) << copied.output;
  EXPECT_NE(copied.output.find("role reference: snapshot of role policy"), std::string::npos) << copied.output;
  auto a = lines_with(read_metrics(dir + "/shared/metrics.jsonl"), "grpo", "reward/mean");
  auto b = lines_with(read_metrics(dir + "/copied/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 3u);
  expect_same_rollouts(a, b, {{"loss", 1e-6}, {"kl", 1e-6}});
  EXPECT_GT(a.back()["kl"].get<double>(), 0.0) << "the policy never moved away from its base";
  // ZeRO-3 at dp 2: the reference's forward gathers the policy's sharded base,
  // generation merges the gathered adapters into it; the same rollouts as plain dp 2.
  const std::string shared_models = " --set 'models={" + student + ", " + policy + ", " + reference + "}'" + kLora;
  Proc dp2 = run_hpcrl("run " + grpo + shared_models + " --out " + dir + "/dp2", 2);
  ASSERT_EQ(dp2.exit_code, 0) << dp2.output;
  Proc zero3 = run_hpcrl("run " + grpo + shared_models + " --set models.policy.optim.zero=3 --out " + dir + "/zero3", 2);
  ASSERT_EQ(zero3.exit_code, 0) << zero3.output;
  EXPECT_NE(zero3.output.find("no copy"), std::string::npos) << zero3.output;
  auto c = lines_with(read_metrics(dir + "/dp2/metrics.jsonl"), "grpo", "reward/mean");
  auto d = lines_with(read_metrics(dir + "/zero3/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(c.size(), 3u);
  expect_same_rollouts(c, d, {{"loss", 1e-5}, {"kl", 1e-5}});
}

TEST(LoraE2E, GrpoWithGenerationApartReceivesMergedWeightsAndFollowsColocated) {
  // Colocated, the engine merges the adapters into the weights it multiplies by at every
  // generation call; apart (one trainer rank, one generating rank), the weight sync sends
  // merged tensors to a copy that has no adapters. Both sample from W + (alpha/r)·B·A.
  const std::string grpo = "tests/e2e/data/grpo_judge.yaml --set stages[0].grpo.iterations=3 --set "
                           "stages[0].grpo.lr=1.0e-2" + kLora;
  const std::string dir = scratch_dir("lora-disagg");
  Proc colo = run_hpcrl("run " + grpo + " --out " + dir + "/colo");
  ASSERT_EQ(colo.exit_code, 0) << colo.output;
  Proc apart = run_hpcrl("run " + grpo + " --set placement.mode=disaggregated --set 'placement.ranges={policy: [0, 0], "
                         "reference: [0, 0], policy.rollout: [1, 1]}' --out " + dir + "/apart", 2);
  ASSERT_EQ(apart.exit_code, 0) << apart.output;
  auto a = lines_with(read_metrics(dir + "/colo/metrics.jsonl"), "grpo", "reward/mean");
  auto b = lines_with(read_metrics(dir + "/apart/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 3u);
  expect_same_rollouts(a, b, {{"loss", 1e-5}, {"kl", 1e-5}, {"grad_norm", 1e-5}});
  EXPECT_GT(a.back()["kl"].get<double>(), 0.0) << "the adapters never moved";
}

}  // namespace
