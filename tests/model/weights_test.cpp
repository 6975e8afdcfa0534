// HF checkpoints in and out: save_pretrained writes what load_model reads back
// (same outputs, same config), tied models store no lm_head, a critic starts
// from a causal-LM checkpoint, and broken checkpoints are clear errors.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/streamed_save.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/util/error.h"
#include "test_models.h"

namespace hpcrl::model {
namespace {

namespace fsys = std::filesystem;

std::string temp_dir(const std::string& name) {
  auto d = fsys::temp_directory_path() / ("hpcrl_weights_test_" + name);
  fsys::remove_all(d);
  return d.string();
}

ModelOptions seeded(uint64_t seed, bool value_head = false) {
  ModelOptions o;
  o.seed = seed;
  o.value_head = value_head;
  return o;
}

TEST(Weights, SaveThenLoadGivesTheSameModel) {
  for (bool tied : {true, false}) {
    ModelArch arch = testing::tiny_arch("qwen2", tied);
    DecoderModel m(arch, parallel::ParallelContext{}, seeded(3));
    std::string dir = temp_dir(tied ? "tied" : "untied");
    save_pretrained(m, dir, /*writer=*/true);
    io::TensorStore store(dir);
    EXPECT_EQ(store.contains("lm_head.weight"), !tied);
    EXPECT_TRUE(store.contains("model.layers.1.self_attn.k_proj.bias"));
    EXPECT_EQ(store.info("model.layers.0.self_attn.k_proj.weight").shape, (std::vector<int64_t>{16, 32}));

    auto loaded = load_model(dir, parallel::ParallelContext{});
    EXPECT_EQ(loaded->arch().tie_word_embeddings, tied);
    EXPECT_EQ(loaded->arch().num_parameters(), arch.num_parameters());
    torch::NoGradGuard ng;
    at::Tensor ids = torch::randint(64, {2, 6}, torch::kLong);
    EXPECT_TRUE(torch::equal(m.local_logits(m.forward(ids).hidden), loaded->local_logits(loaded->forward(ids).hidden)));
  }
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Weights, StreamedSaveWritesTheFileOfTheGatheredCopy) {
  // A dense model is saved tensor by tensor; the file is byte for byte the one
  // written from a gathered copy of every tensor (the path MoE models take).
  DecoderModel m(testing::tiny_arch("qwen2", /*tied=*/false), parallel::ParallelContext{}, seeded(3));
  ASSERT_TRUE(can_stream_save(m, AdapterView::merged));
  const std::string streamed = temp_dir("streamed"), gathered = temp_dir("gathered");
  save_pretrained(m, streamed, /*writer=*/true);
  fsys::create_directories(gathered);
  io::save_tensors_sharded(gathered, gather_full_weights(m), {{"format", "pt"}}, 5'000'000'000ULL);
  const std::string a = file_bytes(streamed + "/model.safetensors"), b = file_bytes(gathered + "/model.safetensors");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << a.size() << " bytes streamed, " << b.size() << " gathered";
  // Shards of at most 20 KB: several files and an index, the same tensors.
  const std::string sharded = temp_dir("streamed_shards");
  save_pretrained(m, sharded, true, AdapterView::merged, 20'000);
  EXPECT_TRUE(fsys::exists(sharded + "/model.safetensors.index.json"));
  io::TensorStore store(sharded);
  auto params = m.named_parameters();
  EXPECT_EQ(store.names().size(), params.size());
  for (const auto& item : params) EXPECT_TRUE(torch::equal(store.load_tensor(item.key()), item.value())) << item.key();
}

TEST(Weights, ModelsWhoseHfTensorsAreNotTheirParametersAreNotStreamed) {
  DecoderModel moe(testing::tiny_moe_arch(), parallel::ParallelContext{}, seeded(6));
  EXPECT_FALSE(can_stream_save(moe, AdapterView::merged)) << "MoE experts are written under per-expert HF names";
  DecoderModel dense(testing::tiny_arch("qwen2"), parallel::ParallelContext{}, seeded(6));
  EXPECT_FALSE(can_stream_save(dense, AdapterView::adapter)) << "the adapter view is a part of the model";
  attach_lora(dense, LoraSpec{{4, 8.0, 0.0}, {"q_proj"}}, 1);
  EXPECT_FALSE(can_stream_save(dense, AdapterView::merged)) << "adapters are merged into their base weights";
}

TEST(Weights, MoeModelSavesHfExpertNamesAndReloads) {
  ModelArch arch = testing::tiny_moe_arch();
  DecoderModel m(arch, parallel::ParallelContext{}, seeded(6));
  std::string dir = temp_dir("moe");
  save_pretrained(m, dir, true);
  io::TensorStore store(dir);
  for (const char* name : {"model.layers.1.mlp.experts.3.down_proj.weight", "model.layers.0.mlp.gate.weight",
                           "model.layers.0.mlp.shared_expert.up_proj.weight", "model.layers.0.mlp.shared_expert_gate.weight"})
    EXPECT_TRUE(store.contains(name)) << name;
  EXPECT_EQ(store.names().size(), m.named_parameters().size());
  auto loaded = load_model(dir, parallel::ParallelContext{});
  EXPECT_EQ(loaded->arch().num_experts, 4);
  torch::NoGradGuard ng;
  at::Tensor ids = torch::randint(64, {2, 6}, torch::kLong);
  EXPECT_TRUE(torch::equal(m.local_logits(m.forward(ids).hidden), loaded->local_logits(loaded->forward(ids).hidden)));
}

TEST(Weights, CriticStartsFromCausalLmCheckpoint) {
  DecoderModel policy(testing::tiny_arch("llama"), parallel::ParallelContext{}, seeded(4));
  std::string dir = temp_dir("critic");
  save_pretrained(policy, dir, true);
  ModelOptions o = seeded(5, /*value_head=*/true);
  o.lm_head = false;
  auto critic = load_model(dir, parallel::ParallelContext{}, o);
  auto params = critic->named_parameters();
  EXPECT_TRUE(torch::equal(params["model.norm.weight"], policy.named_parameters()["model.norm.weight"]));
  EXPECT_GT(params["score.weight"].abs().sum().item<float>(), 0.0f);  // seeded, not left at zero
}

std::string load_error(const std::map<std::string, at::Tensor>& full) {
  DecoderModel m(testing::tiny_arch("qwen2"), parallel::ParallelContext{}, seeded(1));
  try {
    load_weights(m, full, "ckpt-dir");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Weights, MissingAndMisshapenTensorsAreNamed) {
  DecoderModel m(testing::tiny_arch("qwen2"), parallel::ParallelContext{}, seeded(1));
  std::map<std::string, at::Tensor> full;
  for (auto& [name, t] : gather_full_weights(m)) full[name] = t;
  EXPECT_EQ(load_error(full), "");

  auto missing = full;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  std::string err = load_error(missing);
  EXPECT_NE(err.find("ckpt-dir: 1 tensor(s) the model needs are missing: model.layers.1.mlp.up_proj.weight"),
            std::string::npos)
      << err;

  auto wrong = full;
  wrong["model.layers.0.self_attn.k_proj.weight"] = torch::zeros({32, 32});
  err = load_error(wrong);
  EXPECT_NE(err.find("ckpt-dir: tensor 'model.layers.0.self_attn.k_proj.weight' has shape [32, 32] but the model "
                     "(its config.json) expects [16, 32]"),
            std::string::npos)
      << err;
}

TEST(Weights, ModelSpecErrorsNameThePath) {
  try {
    resolve_model_arch("/nonexistent/model");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/model' is neither a directory nor 'preset:NAME'"),
              std::string::npos);
  }
  EXPECT_EQ(resolve_model_arch("preset:tiny").num_layers, 4);
}

}  // namespace
}  // namespace hpcrl::model
