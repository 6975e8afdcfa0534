// Sharded checkpoints without torch: model.safetensors.index.json round trip and
// malformed indexes, sharded writing (split points, stale files removed), and
// SafetensorsDir lookups across single-file and sharded layouts.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "hpcrl/io/safetensors_dir.h"
#include "hpcrl/io/safetensors_index.h"
#include "hpcrl/io/safetensors_writer.h"
#include "st_helpers.h"

using namespace hpcrl;
using namespace hpcrl::io;
using st_test::expect_input_error;
using st_test::ScratchDir;

namespace {

void write_text(const std::string& path, const std::string& text) {
  st_test::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// Five tensors of 40, 40, 24, 100, 8 bytes in this order.
struct FiveTensors {
  std::vector<std::vector<uint8_t>> bytes{std::vector<uint8_t>(40, 1), std::vector<uint8_t>(40, 2),
                                          std::vector<uint8_t>(24, 3), std::vector<uint8_t>(100, 4),
                                          std::vector<uint8_t>(8, 5)};
  std::vector<TensorToWrite> tensors{
      tensor_from_bytes("layers.0.w", Dtype::F32, {10}, bytes[0].data()),
      tensor_from_bytes("layers.1.w", Dtype::F32, {2, 5}, bytes[1].data()),
      tensor_from_bytes("norm", Dtype::BF16, {12}, bytes[2].data()),
      tensor_from_bytes("big", Dtype::U8, {100}, bytes[3].data()),
      tensor_from_bytes("tail", Dtype::I64, {1}, bytes[4].data()),
  };
};

}  // namespace

TEST(SafetensorsIndex, RoundTripKeepsEveryField) {
  ScratchDir dir;
  ShardIndex in;
  in.total_size = 123456789012ull;
  in.weight_map = {{"a.weight", shard_file_name(1, 2)}, {"b.weight", shard_file_name(2, 2)}};
  in.extra_metadata["total_parameters"] = 42;
  write_shard_index(dir.file(kIndexFileName), in);
  ShardIndex out = read_shard_index(dir.file(kIndexFileName));
  EXPECT_EQ(out.total_size, in.total_size);
  EXPECT_EQ(out.weight_map, in.weight_map);
  EXPECT_EQ(out.extra_metadata, in.extra_metadata);
  EXPECT_EQ(shard_file_name(1, 2), "model-00001-of-00002.safetensors");
  // HF's formatting: sorted keys, indent 2.
  auto j = nlohmann::json::parse(st_test::read_bytes(dir.file(kIndexFileName)));
  EXPECT_EQ(j["metadata"]["total_size"], 123456789012ull);
  EXPECT_EQ(j["weight_map"]["a.weight"], "model-00001-of-00002.safetensors");
}

TEST(SafetensorsIndex, MalformedIndexesAreClearErrors) {
  ScratchDir dir;
  std::string p = dir.file(kIndexFileName);
  // `at`: what follows the file's name (a JSON syntax error names its line and column).
  auto expect_bad = [&](const std::string& text, const std::string& fragment, const std::string& at = ": ") {
    write_text(p, text);
    expect_input_error([&] { read_shard_index(p); }, {p + at, fragment, "fix the index or re-save the checkpoint"});
  };
  expect_bad("{\"weight_map\": ", "not valid JSON", ":1:16: ");  // the input ends after its 15 characters
  expect_bad("[]", "must be a JSON object, got array");
  expect_bad("{\"metadata\": {}}", "missing \"weight_map\"");
  expect_bad("{\"weight_map\": []}", "\"weight_map\" must be an object, got array");
  expect_bad("{\"weight_map\": {}}", "\"weight_map\" lists no tensors");
  expect_bad("{\"weight_map\": {\"w\": 3}}", "weight_map['w'] must be the file name of a shard in the same directory");
  expect_bad("{\"weight_map\": {\"w\": \"../../etc/passwd\"}}", "got \"../../etc/passwd\"");
  expect_bad("{\"metadata\": {\"total_size\": -5}, \"weight_map\": {\"w\": \"a.safetensors\"}}",
             "metadata.total_size must be a non-negative integer, got -5");
  write_text(p, "{\"metadata\": {\"total_size\": 1.6e10}, \"weight_map\": {\"w\": \"a.safetensors\"}}");
  EXPECT_EQ(read_shard_index(p).total_size, 16000000000ull);
}

TEST(SafetensorsSharded, SplitsInOrderAndReadsBack) {
  ScratchDir dir;
  FiveTensors five;
  auto files = write_safetensors_sharded(dir.path().string(), five.tensors, {{"format", "pt"}}, 90);
  // 40+40 fit in 90; 24 opens a new shard; 100 > 90 is written alone right away; 8 joins the 24.
  ASSERT_EQ(files, (std::vector<std::string>{shard_file_name(1, 3), shard_file_name(2, 3), shard_file_name(3, 3),
                                             kIndexFileName}));
  ShardIndex index = read_shard_index(dir.file(kIndexFileName));
  EXPECT_EQ(index.total_size, 40u + 40 + 24 + 100 + 8);
  EXPECT_EQ(index.weight_map.at("layers.0.w"), shard_file_name(1, 3));
  EXPECT_EQ(index.weight_map.at("layers.1.w"), shard_file_name(1, 3));
  EXPECT_EQ(index.weight_map.at("big"), shard_file_name(2, 3));
  EXPECT_EQ(index.weight_map.at("norm"), shard_file_name(3, 3));
  EXPECT_EQ(index.weight_map.at("tail"), shard_file_name(3, 3));

  SafetensorsDir ckpt(dir.path().string());
  EXPECT_EQ(ckpt.source(), dir.file(kIndexFileName));
  EXPECT_EQ(ckpt.files().size(), 3u);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"big", "layers.0.w", "layers.1.w", "norm", "tail"}));
  for (size_t i = 0; i < five.tensors.size(); ++i) {
    const auto& name = five.tensors[i].name;
    EXPECT_EQ(ckpt.info(name).shape, five.tensors[i].shape) << name;
    EXPECT_EQ(std::memcmp(ckpt.data(name), five.bytes[i].data(), five.bytes[i].size()), 0) << name;
    EXPECT_EQ(ckpt.file_of(name).metadata().at("format"), "pt");
  }
  // The index file itself opens the same checkpoint.
  EXPECT_EQ(SafetensorsDir(dir.file(kIndexFileName)).names(), ckpt.names());
}

TEST(SafetensorsSharded, RewritingReplacesTheOldLayout) {
  ScratchDir dir;
  FiveTensors five;
  write_safetensors_sharded(dir.path().string(), five.tensors, {}, 90);
  auto files = write_safetensors_sharded(dir.path().string(), five.tensors, {}, 1000);
  EXPECT_EQ(files, std::vector<std::string>{kSingleFileName});
  std::vector<std::string> left;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{kSingleFileName}) << "stale shards and index removed";
  SafetensorsDir ckpt(dir.path().string());
  EXPECT_EQ(ckpt.source(), dir.file(kSingleFileName));
  EXPECT_EQ(ckpt.names().size(), 5u);

  files = write_safetensors_sharded(dir.path().string(), five.tensors, {}, 90);
  EXPECT_FALSE(std::filesystem::exists(dir.file(kSingleFileName))) << "model.safetensors would shadow the index";
  EXPECT_EQ(SafetensorsDir(dir.path().string()).files().size(), 3u);
}

TEST(SafetensorsDirErrors, IndexAndShardsMustAgree) {
  ScratchDir dir;
  FiveTensors five;
  write_safetensors_sharded(dir.path().string(), five.tensors, {}, 90);
  std::string index = dir.file(kIndexFileName);

  ShardIndex wrong = read_shard_index(index);
  wrong.weight_map["norm"] = shard_file_name(1, 3);
  write_shard_index(index, wrong);
  expect_input_error(
      [&] { SafetensorsDir d(dir.path().string()); },
      {index + ": weight_map puts tensor 'norm' in model-00001-of-00003.safetensors", "has no such tensor"});

  wrong.weight_map["norm"] = "model-00009-of-00009.safetensors";
  write_shard_index(index, wrong);
  expect_input_error(
      [&] { SafetensorsDir d(dir.path().string()); },
      {index + ": shard model-00009-of-00009.safetensors (holding tensor 'norm') not found in " + dir.path().string()});

  // A corrupt shard is reported by its own path.
  std::filesystem::resize_file(dir.file(shard_file_name(2, 3)), 50);
  wrong.weight_map["norm"] = shard_file_name(3, 3);
  write_shard_index(index, wrong);
  expect_input_error([&] { SafetensorsDir d(dir.path().string()); }, {dir.file(shard_file_name(2, 3)) + ": "});
}

TEST(SafetensorsDirErrors, NothingLoadableOrUnknownName) {
  ScratchDir dir;
  float x[1] = {1};
  write_safetensors(dir.file("adapter_model.safetensors"), {tensor_from_bytes("w", Dtype::F32, {1}, x)});
  expect_input_error([&] { SafetensorsDir d(dir.path().string()); },
                     {"no model.safetensors or model.safetensors.index.json here",
                      "safetensors files present: adapter_model.safetensors"});
  expect_input_error([&] { SafetensorsDir d(dir.file("missing")); }, {"checkpoint not found: " + dir.file("missing")});

  SafetensorsDir one(dir.file("adapter_model.safetensors"));
  EXPECT_TRUE(one.contains("w"));
  expect_input_error([&] { one.info("ww"); }, {"no tensor named 'ww'", "did you mean 'w'?"});
}
