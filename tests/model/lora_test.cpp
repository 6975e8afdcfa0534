// LoRA on one rank: an adapted model starts equal to its base (B = 0), trains
// only its factors, computes W + (alpha/r)·B·A (checked against the merged
// plain model and by hand), bypasses its adapters on request, and writes and
// reads PEFT's adapter files.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <filesystem>
#include <set>

#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "test_models.h"

namespace hpcrl::model {
namespace {

namespace fsys = std::filesystem;
namespace tensor = parallel::tensor;

const std::vector<std::string> kAllTargets{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

LoraSpec spec(int64_t rank = 4, double alpha = 8, std::vector<std::string> targets = kAllTargets) {
  return LoraSpec{{rank, alpha, 0.0}, std::move(targets)};
}

ModelOptions seeded(uint64_t seed, bool value_head = false, bool recompute = false) {
  ModelOptions o;
  o.seed = seed;
  o.value_head = value_head;
  o.activation_checkpointing = recompute;
  return o;
}

std::string temp_dir(const std::string& name) {
  auto d = fsys::temp_directory_path() / ("hpcrl_lora_test_" + name);
  fsys::remove_all(d);
  fsys::create_directories(d);
  return d.string();
}

// Every factor ~ N(0, 0.1²) from `seed`, so the adapters change the output.
void randomise_adapters(DecoderModel& m, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::map<std::string, at::Tensor> full;
  for (const auto& p : m.named_parameters())
    if (tensor::is_lora_tensor(p.key())) full[p.key()] = at::empty(p.value().sizes()).normal_(0.0, 0.1, gen);
  load_weights(m, full, "random adapters", AdapterView::adapter);
}

at::Tensor logits(DecoderModel& m, const at::Tensor& ids) {
  torch::NoGradGuard ng;
  return m.local_logits(m.forward(ids).hidden);
}

at::Tensor test_ids() { return at::randint(64, {2, 6}, at::detail::createCPUGenerator(7), at::kLong); }

TEST(Lora, AttachedModelStartsEqualToItsBase) {
  DecoderModel base(testing::tiny_arch(), {}, seeded(5));
  DecoderModel adapted(testing::tiny_arch(), {}, seeded(5));
  attach_lora(adapted, spec(), 5);
  // B = 0: every adapted projection adds s·(x·Aᵀ)·0ᵀ = exact zeros.
  EXPECT_TRUE(torch::equal(logits(base, test_ids()), logits(adapted, test_ids())));
}

TEST(Lora, FreezesEverythingButTheFactorsAndTheValueHead) {
  DecoderModel m(testing::tiny_arch(), {}, seeded(5, /*value_head=*/true));
  attach_lora(m, spec(), 5);
  int factors = 0;
  for (const auto& p : m.named_parameters()) {
    const bool trained = tensor::is_lora_tensor(p.key()) || p.key() == "score.weight";
    EXPECT_EQ(p.value().requires_grad(), trained) << p.key();
    factors += tensor::is_lora_tensor(p.key());
  }
  EXPECT_EQ(factors, 2 * 7 * 2);  // 2 layers × 7 projections × (A, B)
}

TEST(Lora, FirstBackwardReachesBButNotA) {
  DecoderModel m(testing::tiny_arch(), {}, seeded(5));
  attach_lora(m, spec(), 5);
  m.train();
  at::Tensor ids = test_ids();
  m.token_logprobs(m.forward(ids).hidden, ids).logprobs.sum().backward();
  for (const auto& p : m.named_parameters()) {
    const at::Tensor& g = p.value().grad();
    if (!tensor::is_lora_tensor(p.key())) {
      EXPECT_FALSE(g.defined()) << p.key() << ": a frozen weight got a gradient";
    } else if (p.key().find("lora_A") != std::string::npos) {
      EXPECT_EQ(g.abs().max().item<double>(), 0.0) << p.key();  // dL/dA = s·Bᵀ·g·x and B = 0
    } else {
      EXPECT_GT(g.abs().max().item<double>(), 0.0) << p.key();  // dL/dB = s·gᵀ·(x·Aᵀ)
    }
  }
}

TEST(Lora, MergedWeightIsWPlusScaledBTimesA) {
  DecoderModel m(testing::tiny_arch(), {}, seeded(5));
  attach_lora(m, spec(/*rank=*/1, /*alpha=*/2, {"q_proj"}), 5);  // scale = alpha / r = 2
  // A = [1, 2, ..., 32] / 32, B = 0.5 at output row 3 only: B·A is A/2 in row 3, so the merge adds A there.
  at::Tensor a = at::arange(1, 33, at::kFloat).view({1, 32}) / 32.0;
  at::Tensor b = at::zeros({64, 1});
  b[3][0] = 0.5;
  std::map<std::string, at::Tensor> factors{{"model.layers.0.self_attn.q_proj.lora_A.weight", a},
                                            {"model.layers.0.self_attn.q_proj.lora_B.weight", b},
                                            {"model.layers.1.self_attn.q_proj.lora_A.weight", a},
                                            {"model.layers.1.self_attn.q_proj.lora_B.weight", at::zeros({64, 1})}};
  load_weights(m, factors, "literal factors", AdapterView::adapter);
  std::map<std::string, at::Tensor> merged, base;
  for (auto& [n, t] : gather_full_weights(m, AdapterView::merged)) merged[n] = t;
  for (auto& [n, t] : gather_full_weights(m, AdapterView::base)) base[n] = t;
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ(merged.size(), base.size());
  EXPECT_EQ(merged.count("model.layers.0.self_attn.q_proj.lora_A.weight"), 0u);
  at::Tensor delta = merged[q] - base[q];
  EXPECT_TRUE(at::allclose(delta[3], a[0], 0, 1e-6));
  at::Tensor other_rows = delta.clone();
  other_rows[3].zero_();
  EXPECT_EQ(other_rows.abs().max().item<double>(), 0.0);  // B is zero there: W + 0
  EXPECT_TRUE(torch::equal(merged["model.layers.1.self_attn.q_proj.weight"],
                           base["model.layers.1.self_attn.q_proj.weight"]));  // B = 0 there
}

TEST(Lora, ForwardEqualsThePlainModelOfItsMergedWeights) {
  DecoderModel adapted(testing::tiny_arch("qwen3", /*tied=*/false), {}, seeded(5));
  attach_lora(adapted, spec(), 5);
  randomise_adapters(adapted, 9);
  DecoderModel plain(testing::tiny_arch("qwen3", false), {}, seeded(0));
  std::map<std::string, at::Tensor> merged;
  for (auto& [n, t] : gather_full_weights(adapted, AdapterView::merged)) merged[n] = t;
  load_weights(plain, merged, "merged");
  at::Tensor want = logits(plain, test_ids()), got = logits(adapted, test_ids());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-5);
  DecoderModel base(testing::tiny_arch("qwen3", false), {}, seeded(5));
  EXPECT_GT((got - logits(base, test_ids())).abs().max().item<double>(), 1e-3);  // and the adapters matter
}

TEST(Lora, AdaptersOffRunsTheBase) {
  DecoderModel base(testing::tiny_arch(), {}, seeded(5));
  DecoderModel adapted(testing::tiny_arch(), {}, seeded(5));
  attach_lora(adapted, spec(), 5);
  randomise_adapters(adapted, 9);
  at::Tensor with_adapters = logits(adapted, test_ids());
  {
    tensor::AdaptersOff off;
    EXPECT_TRUE(torch::equal(logits(adapted, test_ids()), logits(base, test_ids())));
  }
  EXPECT_TRUE(torch::equal(logits(adapted, test_ids()), with_adapters));  // back on after the guard
}

TEST(Lora, CheckpointedLayersGiveTheSameAdapterGradients) {
  // The embedding is frozen, so the first checkpointed layer's input has no gradient of its own.
  std::map<std::string, at::Tensor> grads[2];
  for (bool recompute : {false, true}) {
    DecoderModel m(testing::tiny_arch(), {}, seeded(5, false, recompute));
    attach_lora(m, spec(), 5);
    randomise_adapters(m, 9);
    m.train();
    at::Tensor ids = test_ids();
    m.token_logprobs(m.forward(ids).hidden, ids).logprobs.sum().backward();
    for (const auto& p : m.named_parameters())
      if (tensor::is_lora_tensor(p.key())) {
        ASSERT_TRUE(p.value().grad().defined()) << p.key() << (recompute ? " (checkpointed)" : "");
        grads[recompute][p.key()] = p.value().grad();
      }
  }
  ASSERT_EQ(grads[1].size(), 28u);
  for (const auto& [name, g] : grads[0]) EXPECT_LE((grads[1][name] - g).abs().max().item<double>(), 1e-6) << name;
}

TEST(Lora, PeftFilesUseThePeftLayout) {
  DecoderModel m(testing::tiny_arch(), {}, seeded(5));
  attach_lora(m, spec(), 5);
  const std::string dir = temp_dir("layout");
  save_lora_adapter(m, spec(), dir, /*writer=*/true, "Qwen/base");
  auto cfg = nlohmann::json::parse(fs::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["task_type"], "CAUSAL_LM");
  EXPECT_EQ(cfg["r"], 4);
  EXPECT_EQ(cfg["lora_alpha"], 8.0);
  EXPECT_EQ(cfg["target_modules"], nlohmann::json(kAllTargets));
  EXPECT_EQ(cfg["base_model_name_or_path"], "Qwen/base");
  io::TensorStore store(dir + "/adapter_model.safetensors");
  EXPECT_EQ(store.names().size(), 28u);
  const std::string p = "base_model.model.model.layers.1.";
  EXPECT_EQ(store.info(p + "self_attn.q_proj.lora_A.weight").shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(store.info(p + "self_attn.q_proj.lora_B.weight").shape, (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(store.info(p + "self_attn.k_proj.lora_B.weight").shape, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(store.info(p + "mlp.down_proj.lora_A.weight").shape, (std::vector<int64_t>{4, 48}));
  EXPECT_EQ(store.info(p + "mlp.down_proj.lora_B.weight").shape, (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(read_lora_spec(dir).targets, kAllTargets);
}

TEST(Lora, CriticAdapterAlsoSavesTheValueHead) {
  DecoderModel m(testing::tiny_arch(), {}, seeded(5, /*value_head=*/true));
  attach_lora(m, spec(4, 8, {"q_proj"}), 5);
  const std::string dir = temp_dir("critic");
  save_lora_adapter(m, spec(4, 8, {"q_proj"}), dir, true, "base");
  io::TensorStore store(dir + "/adapter_model.safetensors");
  EXPECT_TRUE(store.contains("base_model.model.score.weight"));
  auto cfg = nlohmann::json::parse(fs::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(cfg["modules_to_save"], nlohmann::json::array({"score"}));
}

TEST(Lora, AdapterRoundTripsThroughPeftFiles) {
  DecoderModel a(testing::tiny_arch(), {}, seeded(5));
  attach_lora(a, spec(), 5);
  randomise_adapters(a, 9);
  const std::string dir = temp_dir("roundtrip");
  save_lora_adapter(a, spec(), dir, true, "base");
  DecoderModel b(testing::tiny_arch(), {}, seeded(5));
  attach_lora(b, spec(), 6);  // other initial factors, overwritten by the load
  load_lora_adapter(b, spec(), dir);
  auto pb = b.named_parameters();
  for (const auto& p : a.named_parameters()) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
}

TEST(Lora, AdapterOfAnotherRankIsRefusedNamingBoth) {
  DecoderModel a(testing::tiny_arch(), {}, seeded(5));
  attach_lora(a, spec(4), 5);
  const std::string dir = temp_dir("rank");
  save_lora_adapter(a, spec(4), dir, true, "base");
  DecoderModel b(testing::tiny_arch(), {}, seeded(5));
  attach_lora(b, spec(8), 5);
  try {
    load_lora_adapter(b, spec(8), dir);
    FAIL() << "an adapter of rank 4 loaded into rank 8";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the adapter has r 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lora has rank 8"), std::string::npos) << msg;
  }
}

TEST(Lora, ExpertProjectionIsRefused) {
  DecoderModel m(testing::tiny_moe_arch(), {}, seeded(5));
  try {
    attach_lora(m, spec(4, 8, {"q_proj", "up_proj"}), 5);
    FAIL() << "an adapter was put on MoE experts";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("LoRA target 'up_proj': layer 0 has no dense projection"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hpcrl::model
