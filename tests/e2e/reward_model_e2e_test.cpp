// End-to-end: GRPO with `reward: [math, rm, ...]`, where rm is a `type: model`
// reward (a value-head role). A reward model started from the SFT policy
// (`init.from`, its value head seeded fresh) adds a score that varies from
// response to response — which also proves the runner snapshots a role that
// only a reward reads (unsnapshotted, its weights are zeros and so is every
// score) — and `hpcrl validate` accepts that pipeline without warnings. Adding
// a second reward model whose value is 0.5 at every token (an HF checkpoint
// written with the project's safetensors writer: embeddings all 8, every
// projection 0, so the final norm gives ones and the score head, 0.5/16 per
// entry, gives exactly 0.5) must raise the mean reward by exactly 0.5 and
// leave the (non-trivial) update unchanged, since group-normalised advantages
// ignore a shift shared by the group. A reward model with another vocabulary
// stops the run with exit 2, naming the reward's file:line:col.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/io/safetensors_writer.h"
#include "run_util.h"

using namespace hpcrl::test;

namespace {

// An HF reward-model checkpoint (config.json + model.safetensors) of a one-layer
// llama with `vocab` token ids whose value is 0.5 at every token.
void write_constant_reward_model(const std::string& dir, int64_t vocab) {
  const int64_t C = 16, I = 32;
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"LlamaForSequenceClassification"}},
                        {"model_type", "llama"}, {"vocab_size", vocab}, {"hidden_size", C},
                        {"intermediate_size", I}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                        {"num_key_value_heads", 2}, {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6},
                        {"rope_theta", 10000.0}, {"tie_word_embeddings", true}, {"hidden_act", "silu"},
                        {"torch_dtype", "float32"}};
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  // mean(8²) + 1e-6 rounds to 64 in fp32, so the final norm maps the embedding to exactly 1.
  std::map<std::string, std::pair<std::vector<int64_t>, float>> spec{
      {"model.embed_tokens.weight", {{vocab, C}, 8.0f}},
      {"model.layers.0.input_layernorm.weight", {{C}, 1.0f}},
      {"model.layers.0.self_attn.q_proj.weight", {{C, C}, 0.0f}},
      {"model.layers.0.self_attn.k_proj.weight", {{C, C}, 0.0f}},
      {"model.layers.0.self_attn.v_proj.weight", {{C, C}, 0.0f}},
      {"model.layers.0.self_attn.o_proj.weight", {{C, C}, 0.0f}},
      {"model.layers.0.post_attention_layernorm.weight", {{C}, 1.0f}},
      {"model.layers.0.mlp.gate_proj.weight", {{I, C}, 0.0f}},
      {"model.layers.0.mlp.up_proj.weight", {{I, C}, 0.0f}},
      {"model.layers.0.mlp.down_proj.weight", {{C, I}, 0.0f}},
      {"model.norm.weight", {{C}, 1.0f}},
      {"score.weight", {{1, C}, 0.5f / float(C)}},
  };
  std::map<std::string, std::vector<float>> data;
  std::vector<hpcrl::io::TensorToWrite> tensors;
  for (const auto& [name, s] : spec) {
    int64_t numel = 1;
    for (int64_t d : s.first) numel *= d;
    auto& buf = data[name] = std::vector<float>(numel, s.second);
    tensors.push_back(hpcrl::io::tensor_from_bytes(name, hpcrl::io::Dtype::F32, s.first, buf.data()));
  }
  hpcrl::io::write_safetensors(dir + "/model.safetensors", tensors);
}

// tests/e2e/data/tiny.yaml with reward-model roles (name → models entry), each a
// `type: model` reward of the same name summed into GRPO's reward after math.
std::string config_with_rms(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& rms) {
  std::string models, rewards, names;
  for (const auto& [name, role] : rms) {
    models += "  " + name + ": " + role + "\n";
    rewards += "  " + name + ": {type: model, model: " + name + "}\n";
    names += ", " + name;
  }
  return write_tiny_config_with(
      dir + "/rm.yaml", {{"  student:   {init: {preset: tiny-2l}}\n", "  student:   {init: {preset: tiny-2l}}\n" + models},
                         {"  math: {type: verifiable}\n", "  math: {type: verifiable}\n" + rewards},
                         {"reward: math,", "reward: [math" + names + "],"}});
}

const std::string kShort = " --set stages.0.sft.steps=10 --set stages.2.distill.steps=1";
const std::string kFromPolicy = "{init: {from: policy}, head: value}";

// GRPO's metrics of a run of `config` (cached: several tests compare with the same run).
const std::vector<nlohmann::json>& grpo_metrics(const std::string& name, const std::string& config) {
  static std::map<std::string, std::vector<nlohmann::json>> runs;
  if (!runs.count(name)) {
    const std::string dir = scratch_dir(name);
    Proc p = run_hpcrl("run " + config + kShort + " --out " + dir + "/run");
    EXPECT_EQ(p.exit_code, 0) << p.output;
    if (config.find("rm.yaml") != std::string::npos)  // the runner gave the reward role the policy's weights
      EXPECT_NE(p.output.find("role rm: snapshot of role policy"), std::string::npos) << p.output;
    runs[name] = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean");
  }
  return runs[name];
}
const std::vector<nlohmann::json>& plain_run() { return grpo_metrics("rm-plain", "tests/e2e/data/tiny.yaml"); }
const std::vector<nlohmann::json>& from_policy_run() {
  static const std::string dir = scratch_dir("rm-from-policy-cfg");
  return grpo_metrics("rm-from-policy", config_with_rms(dir, {{"rm", kFromPolicy}}));
}
}  // namespace

TEST(RewardModelE2E, RewardModelFromTheSftPolicyScoresEveryResponse) {
  const std::string dir = scratch_dir("rm-validate");
  Proc v = run_hpcrl("validate " + config_with_rms(dir, {{"rm", kFromPolicy}}));
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(v.output.find("warning"), std::string::npos) << "the reward role counts as used: " << v.output;
  const auto& a = plain_run();
  const auto& b = from_policy_run();
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  // Iteration 1 samples the same responses in both runs (same seed, same SFT policy):
  // only the model's scores are added, and they differ from response to response.
  EXPECT_DOUBLE_EQ(b[0]["accuracy"].get<double>(), a[0]["accuracy"].get<double>());
  EXPECT_GT(std::abs(b[0]["reward/mean"].get<double>() - a[0]["reward/mean"].get<double>()), 1e-4);
  EXPECT_GT(std::abs(b[0]["reward/std"].get<double>() - a[0]["reward/std"].get<double>()), 1e-4);
}

TEST(RewardModelE2E, ConstantRewardModelShiftsTheRewardAndLeavesTheUpdateUnchanged) {
  const std::string dir = scratch_dir("rm-constant");
  write_constant_reward_model(dir + "/const", 272);
  const std::string cfg = config_with_rms(
      dir, {{"rm", kFromPolicy}, {"rmc", "{init: {path: " + dir + "/const}, head: value, tokenizer: byte}"}});
  Proc p = run_hpcrl("run " + cfg + kShort + " --out " + dir + "/run");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto& a = from_policy_run();
  auto b = lines_with(read_metrics(dir + "/run/metrics.jsonl"), "grpo", "reward/mean");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_GT(std::abs(a[0]["loss"].get<double>()), 1e-3) << "the compared update is not trivial";
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_NEAR(b[i]["reward/mean"].get<double>(), a[i]["reward/mean"].get<double>() + 0.5, 1e-9);
    EXPECT_NEAR(b[i]["reward/std"].get<double>(), a[i]["reward/std"].get<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(b[i]["accuracy"].get<double>(), a[i]["accuracy"].get<double>());
    // Scores are float32 in the update: x + 0.5 rounds differently from x, by < 1e-7.
    EXPECT_NEAR(b[i]["loss"].get<double>(), a[i]["loss"].get<double>(), 1e-5);
    EXPECT_NEAR(b[i]["kl"].get<double>(), a[i]["kl"].get<double>(), 1e-6);
  }
}

TEST(RewardModelE2E, RewardModelWithAnotherVocabularyStopsTheRunNamingTheReward) {
  const std::string dir = scratch_dir("rm-vocab");
  write_constant_reward_model(dir + "/rm", 256);
  const std::string cfg = config_with_rms(dir, {{"rm", "{init: {path: " + dir + "/rm}, head: value, tokenizer: byte}"}});
  Proc p = run_hpcrl("run " + cfg + " --set stages.0.sft.steps=1 --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find(cfg + ":12:7: rewards.rm: the reward model 'rm' has a vocabulary of 256 tokens but the "
                          "policy 'policy' has 272"),
            std::string::npos)
      << p.output;
}
