// The torch bridge: save_tensors → TensorStore round trips for the dtypes
// checkpoints use, slice loading equal to slicing the full tensor (what each
// tp/ep rank loads), sharded save/load, and the stories260k checkpoint.
#include "hpcrl/io/tensor_store.h"

#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/io/safetensors_index.h"
#include "hpcrl/io/safetensors_writer.h"
#include "st_helpers.h"

using namespace hpcrl;
using namespace hpcrl::io;
using st_test::expect_input_error;
using st_test::ScratchDir;

namespace {

NamedTensors sample_tensors() {
  at::manual_seed(7);
  return {
      {"f32", at::randn({4, 6})},
      {"bf16", at::randn({3, 5}).to(at::kBFloat16)},
      {"f16", at::randn({7}).to(at::kHalf)},
      {"f64", at::randn({2, 2, 2}, at::kDouble)},
      {"i64", at::randint(-1000, 1000, {9}, at::kLong)},
      {"i32", at::randint(-1000, 1000, {3, 3}, at::kInt)},
      {"i16", at::randint(-1000, 1000, {5}, at::kShort)},
      {"i8", at::randint(-100, 100, {6}, at::kChar)},
      {"u8", at::randint(0, 255, {6}, at::kByte)},
      {"bool", at::randint(0, 2, {4}, at::kLong).to(at::kBool)},
      {"empty", at::empty({0, 3})},
      {"scalar", at::scalar_tensor(3.5)},
      {"transposed", at::randn({5, 3}).t()},  // non-contiguous input
  };
}

}  // namespace

TEST(TensorStore, SaveLoadRoundTripEveryDtype) {
  ScratchDir dir;
  NamedTensors tensors = sample_tensors();
  save_tensors(dir.file("model.safetensors"), tensors, {{"step", "12"}});
  TensorStore store(dir.path().string());
  EXPECT_EQ(store.names().size(), tensors.size());
  const auto& meta = store.checkpoint().files().at(0)->metadata();
  EXPECT_EQ(meta.at("format"), "pt") << "transformers refuses metadata without format";
  EXPECT_EQ(meta.at("step"), "12");
  for (const auto& [name, t] : tensors) {
    at::Tensor back = store.load_tensor(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.sizes(), t.sizes()) << name;
    EXPECT_TRUE(at::equal(back, t)) << name;
  }
  EXPECT_EQ(store.load_tensor("scalar").dim(), 0);
  EXPECT_EQ(store.load_tensor("scalar").item<float>(), 3.5f);
}

TEST(TensorStore, LoadConvertsDtypeOnRequest) {
  ScratchDir dir;
  at::Tensor w = at::randn({8, 4}).to(at::kBFloat16);
  save_tensors(dir.file("w.safetensors"), {{"w", w}});
  TensorStore store(dir.file("w.safetensors"));
  at::Tensor f = store.load_tensor("w", at::kFloat);
  EXPECT_EQ(f.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(f, w.to(at::kFloat)));
  EXPECT_TRUE(at::equal(store.load_slice("w", 0, 1, 2, at::kFloat), w.to(at::kFloat).chunk(2, 0)[1]));
}

// Every way a rank can take its part must equal slicing the whole tensor.
TEST(TensorStore, SlicesEqualSlicingTheFullTensor) {
  ScratchDir dir;
  at::Tensor t = at::randn({8, 6, 4});
  at::Tensor b = at::randn({12, 10}).to(at::kBFloat16);
  save_tensors(dir.file("s.safetensors"), {{"t", t}, {"b", b}});
  TensorStore store(dir.file("s.safetensors"));
  for (int64_t dim = 0; dim < 3; ++dim)
    for (int64_t parts : {1, 2}) {
      auto chunks = t.chunk(parts, dim);
      for (int64_t i = 0; i < parts; ++i)
        EXPECT_TRUE(at::equal(store.load_slice("t", dim, i, parts), chunks[i])) << dim << " " << i << "/" << parts;
    }
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(at::equal(store.load_slice("b", 0, i, 4), b.chunk(4, 0)[i]));
    EXPECT_TRUE(at::equal(store.load_slice("b", -1, i % 2, 2), b.chunk(2, 1)[i % 2]));
  }
  EXPECT_TRUE(at::equal(store.load_narrow("t", 1, 1, 4), t.narrow(1, 1, 4)));
  EXPECT_TRUE(at::equal(store.load_narrow("t", 2, 3, 0), t.narrow(2, 3, 0)));
  expect_input_error([&] { store.load_slice("t", 1, 0, 4); },
                     {"tensor 't' has shape [8, 6, 4]: dim 1 (6) does not split into 4 equal parts",
                      "choose a tp/ep size that divides it"});
  expect_input_error([&] { store.load_slice("t", 3, 0, 2); }, {"tensor 't' has shape [8, 6, 4], no dim 3"});
  expect_input_error([&] { store.load_narrow("t", 0, 6, 3); }, {"[6, 9) along dim 0 is out of range"});
  expect_input_error([&] { store.load_tensor("tt"); }, {"no tensor named 'tt'", "did you mean 't'?"});
}

TEST(TensorStore, ShardedSaveLoadsLikeOneFile) {
  ScratchDir dir;
  NamedTensors tensors = sample_tensors();
  auto files = save_tensors_sharded(dir.path().string(), tensors, {}, 64);
  ASSERT_GT(files.size(), 3u);
  EXPECT_EQ(files.back(), kIndexFileName);
  ShardIndex index = read_shard_index(dir.file(kIndexFileName));
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += static_cast<uint64_t>(t.numel()) * t.element_size();
  EXPECT_EQ(index.total_size, total);
  TensorStore store(dir.path().string());
  for (const auto& [name, t] : tensors) EXPECT_TRUE(at::equal(store.load_tensor(name), t)) << name;
}

TEST(TensorStore, UnsupportedDtypesAreNamed) {
  ScratchDir dir;
  expect_input_error(
      [&] {
        save_tensors(dir.file("c.safetensors"), {{"z", at::randn({2}, at::kComplexFloat)}});
      },
      {"tensor 'z' has torch dtype ComplexFloat, which safetensors cannot store"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.safetensors")));
  // A checkpoint dtype that no LibTorch version here maps to at::ScalarType.
  uint8_t e8m0[2] = {127, 128};
  write_safetensors(dir.file("s.safetensors"), {tensor_from_bytes("scales", Dtype::F8_E8M0, {2}, e8m0)});
  TensorStore store(dir.file("s.safetensors"));
  expect_input_error([&] { store.load_tensor("scales"); },
                     {dir.file("s.safetensors") + ": tensor 'scales' has dtype F8_E8M0, which LibTorch",
                      "cannot hold"});
}

TEST(TensorStore, Stories260kLoadsAndSlicesPerRank) {
  std::string dir = std::string(HPCRL_DATA_DIR) + "/stories260k";
  TensorStore store(dir);
  at::Tensor emb = store.load_tensor("model.embed_tokens.weight");
  EXPECT_EQ(emb.sizes(), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::isfinite(emb).all().item<bool>());
  EXPECT_GT(emb.abs().sum().item<float>(), 0.f);
  // tp=4: vocab rows of the embedding, column split of o_proj, kv heads of k_proj.
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_TRUE(at::equal(store.load_slice("model.embed_tokens.weight", 0, r, 4), emb.chunk(4, 0)[r]));
    at::Tensor o = store.load_tensor("model.layers.2.self_attn.o_proj.weight");
    EXPECT_TRUE(at::equal(store.load_slice("model.layers.2.self_attn.o_proj.weight", 1, r, 4), o.chunk(4, 1)[r]));
    at::Tensor k = store.load_tensor("model.layers.4.self_attn.k_proj.weight");
    EXPECT_EQ(k.sizes(), (std::vector<int64_t>{32, 64}));
    EXPECT_TRUE(at::equal(store.load_slice("model.layers.4.self_attn.k_proj.weight", 0, r, 4), k.chunk(4, 0)[r]));
  }
  expect_input_error([&] { store.load_slice("model.layers.0.mlp.gate_proj.weight", 0, 0, 8); },
                     {"model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape [172, 64]: dim 0 "
                      "(172) does not split into 8 equal parts"});
}
