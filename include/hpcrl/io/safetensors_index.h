// The index of a sharded HF checkpoint, model.safetensors.index.json:
//   {"metadata": {"total_size": N, ...}, "weight_map": {"tensor name": "shard file", ...}}
// total_size is the sum of the tensors' byte sizes. Shard names are bare file
// names in the same directory; anything with a path separator is rejected so a
// hostile index cannot point the loader outside the checkpoint. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace hpcrl::io {

// HF's file names for a checkpoint "model".
inline constexpr const char* kSingleFileName = "model.safetensors";
inline constexpr const char* kIndexFileName = "model.safetensors.index.json";
std::string shard_file_name(int index, int count);  // (1, 3) → model-00001-of-00003.safetensors

struct ShardIndex {
  uint64_t total_size = 0;
  std::map<std::string, std::string> weight_map;             // tensor name → shard file name
  nlohmann::json extra_metadata = nlohmann::json::object();  // other "metadata" keys, kept on rewrite
};

// InputError naming the index file and the key path on any malformed entry.
ShardIndex read_shard_index(const std::string& path);

// Writes the index atomically, formatted as HF does (sorted keys, indent 2).
void write_shard_index(const std::string& path, const ShardIndex& index);

}  // namespace hpcrl::io
