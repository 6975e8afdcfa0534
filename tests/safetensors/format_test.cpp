// Torch-free safetensors: writer → reader round trips over every dtype (incl.
// empty and scalar tensors), the HF layout of what the writer produces, the
// writer's refusals, and the real stories260k checkpoint read against its config.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hpcrl/io/safetensors.h"
#include "hpcrl/io/safetensors_writer.h"
#include "st_helpers.h"

using namespace hpcrl;
using namespace hpcrl::io;
using st_test::ScratchDir;

namespace {

// Distinct bytes per tensor so a mixed-up offset shows as a mismatch.
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 13);
  return v;
}

}  // namespace

TEST(SafetensorsRoundTrip, EveryDtypeEmptyAndScalarTensors) {
  ScratchDir dir;
  std::vector<std::vector<uint8_t>> data;
  std::vector<TensorToWrite> tensors;
  std::vector<std::string> names = dtype_names();
  data.reserve(names.size() + 2);
  for (size_t i = 0; i < names.size(); ++i) {
    Dtype d = *parse_dtype(names[i]);
    data.push_back(pattern(2 * 3 * dtype_size(d), static_cast<uint8_t>(i)));
    tensors.push_back(tensor_from_bytes("t." + names[i], d, {2, 3}, data.back().data()));
  }
  data.push_back({});
  tensors.push_back(tensor_from_bytes("empty", Dtype::F32, {0, 4}, data.back().data()));
  data.push_back(pattern(8, 99));
  tensors.push_back(tensor_from_bytes("scalar", Dtype::F64, {}, data.back().data()));
  std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "ünïcode ok"}};
  write_safetensors(dir.file("a.safetensors"), tensors, meta);

  SafetensorsFile f(dir.file("a.safetensors"));
  ASSERT_EQ(f.tensors().size(), tensors.size());
  EXPECT_EQ(f.metadata(), meta);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = f.info(tensors[i].name);
    EXPECT_EQ(t.dtype, tensors[i].dtype) << t.name;
    EXPECT_EQ(t.shape, tensors[i].shape) << t.name;
    ASSERT_EQ(t.nbytes(), data[i].size()) << t.name;
    EXPECT_EQ(std::memcmp(f.data(t), data[i].data(), data[i].size()), 0) << t.name;
  }
  EXPECT_EQ(f.info("scalar").numel(), 1);
  EXPECT_EQ(f.info("empty").numel(), 0);
}

// What HF's loader demands: 8-aligned header, data packed from offset 0 to the
// end of the file without holes, each tensor aligned to its element size.
TEST(SafetensorsRoundTrip, WriterProducesHfLayout) {
  ScratchDir dir;
  std::vector<uint8_t> a(3 * 2), b(5 * 8), c(7 * 4), d(1);
  std::vector<TensorToWrite> tensors{
      tensor_from_bytes("b.bf16", Dtype::BF16, {3}, a.data()), tensor_from_bytes("a.i64", Dtype::I64, {5}, b.data()),
      tensor_from_bytes("z.f32", Dtype::F32, {7}, c.data()), tensor_from_bytes("m.u8", Dtype::U8, {1}, d.data())};
  write_safetensors(dir.file("x.safetensors"), tensors, {{"format", "pt"}});
  std::vector<uint8_t> bytes = st_test::read_bytes(dir.file("x.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  EXPECT_EQ(n % 8, 0u);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find("__metadata__"), 2u) << "metadata comes first";
  auto j = nlohmann::ordered_json::parse(header);
  std::vector<std::string> order;
  for (const auto& [k, v] : j.items()) order.push_back(k);
  EXPECT_EQ(order, (std::vector<std::string>{"__metadata__", "a.i64", "z.f32", "b.bf16", "m.u8"}));

  SafetensorsFile f(dir.file("x.safetensors"));
  uint64_t expect_begin = 0;
  for (const TensorInfo& t : f.tensors()) {  // by offset
    EXPECT_EQ(t.begin, expect_begin) << t.name;
    EXPECT_EQ(t.begin % dtype_size(t.dtype), 0u) << t.name;
    expect_begin = t.end;
  }
  EXPECT_EQ(8 + n + expect_begin, bytes.size()) << "data ends exactly at the end of the file";
}

TEST(SafetensorsWriter, RefusesBadNamesAndLeavesNothingBehind) {
  ScratchDir dir;
  float x[2] = {1, 2};
  std::string path = dir.file("bad.safetensors");
  st_test::expect_input_error(
      [&] {
        write_safetensors(path,
                          {tensor_from_bytes("w", Dtype::F32, {2}, x), tensor_from_bytes("w", Dtype::F32, {2}, x)});
      },
      {"tensor 'w' is given twice"});
  st_test::expect_input_error([&] { write_safetensors(path, {tensor_from_bytes("__metadata__", Dtype::F32, {2}, x)}); },
                              {"'__metadata__' is reserved"});
  st_test::expect_input_error([&] { write_safetensors(path, {tensor_from_bytes("", Dtype::F32, {2}, x)}); },
                              {"empty name"});
  st_test::expect_input_error(
      [&] {
        write_safetensors(path, {tensor_from_bytes("n", Dtype::F32, {2, -1}, x)});
      },
      {"tensor 'n' has a negative dimension -1"});
  st_test::expect_input_error(
      [&] { write_safetensors(path, {tensor_from_bytes(std::string("bad\xff"), Dtype::F32, {2}, x)}); },
      {"must be UTF-8"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A byte source that under-delivers fails the write; the old file stays intact
// and no temporary file is left.
TEST(SafetensorsWriter, FailedWriteKeepsThePreviousFile) {
  ScratchDir dir;
  std::string path = dir.file("keep.safetensors");
  float x[2] = {1, 2};
  write_safetensors(path, {tensor_from_bytes("w", Dtype::F32, {2}, x)});
  auto before = st_test::read_bytes(path);
  TensorToWrite short_source{"w", Dtype::F32, {4}, [&](const ByteSink& sink) { sink(x, sizeof x); }};
  EXPECT_THROW(write_safetensors(path, {short_source}), RuntimeError);
  EXPECT_EQ(st_test::read_bytes(path), before);
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

// The real checkpoint: every tensor a Llama model with this config.json needs,
// with the shapes it implies, float32, finite.
TEST(SafetensorsFixture, Stories260kMatchesItsConfig) {
  std::string dir = std::string(HPCRL_DATA_DIR) + "/stories260k";
  std::ifstream cfg_in(dir + "/config.json");
  ASSERT_TRUE(cfg_in.good()) << "fixture missing: " << dir << "/config.json";
  auto cfg = nlohmann::json::parse(cfg_in);
  int64_t dim = cfg["hidden_size"], layers = cfg["num_hidden_layers"], heads = cfg["num_attention_heads"];
  int64_t kv = cfg["num_key_value_heads"], hidden = cfg["intermediate_size"], vocab = cfg["vocab_size"];
  ASSERT_EQ(dim, 64);
  ASSERT_EQ(layers, 5);
  ASSERT_EQ(heads, 8);
  ASSERT_EQ(kv, 4);
  ASSERT_EQ(hidden, 172);
  ASSERT_EQ(vocab, 512);
  ASSERT_TRUE(cfg["tie_word_embeddings"].get<bool>());
  int64_t hd = dim / heads;

  SafetensorsFile f(dir + "/model.safetensors");
  std::map<std::string, std::vector<int64_t>> expect{{"model.embed_tokens.weight", {vocab, dim}},
                                                     {"model.norm.weight", {dim}}};
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    expect[p + "input_layernorm.weight"] = {dim};
    expect[p + "post_attention_layernorm.weight"] = {dim};
    expect[p + "self_attn.q_proj.weight"] = {heads * hd, dim};
    expect[p + "self_attn.k_proj.weight"] = {kv * hd, dim};
    expect[p + "self_attn.v_proj.weight"] = {kv * hd, dim};
    expect[p + "self_attn.o_proj.weight"] = {dim, heads * hd};
    expect[p + "mlp.gate_proj.weight"] = {hidden, dim};
    expect[p + "mlp.up_proj.weight"] = {hidden, dim};
    expect[p + "mlp.down_proj.weight"] = {dim, hidden};
  }
  EXPECT_EQ(f.tensors().size(), expect.size()) << "tied embeddings: no lm_head.weight";
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);
  for (const auto& [name, shape] : expect) {
    const TensorInfo* t = f.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->dtype, Dtype::F32) << name;
    std::vector<float> v(static_cast<size_t>(t->numel()));
    std::memcpy(v.data(), f.data(*t), t->nbytes());
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << name;
  }
  st_test::expect_input_error([&] { f.info("model.layers.0.self_attn.q_proj.weigth"); },
                              {"model.safetensors: no tensor named 'model.layers.0.self_attn.q_proj.weigth'",
                               "did you mean 'model.layers.0.self_attn.q_proj.weight'?"});
}
