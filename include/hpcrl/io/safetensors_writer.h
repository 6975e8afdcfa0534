// Writing safetensors files and sharded checkpoints that HF tools load as they
// are. Torch-free: a tensor to write is a name, dtype, shape and a callback that
// streams its bytes, so a caller can copy one GPU tensor at a time to the host
// instead of building the whole checkpoint in memory. Files are written to a
// temporary sibling and renamed, so a crash never leaves a half-written file.
//
// Layout follows HF's writer: tensors ordered by dtype size (largest first, so
// every tensor starts aligned to its element size) then by name; the JSON header
// is padded with spaces to a multiple of 8 bytes; "__metadata__" comes first.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hpcrl/io/safetensors.h"

namespace hpcrl::io {

// Receives bytes of one tensor; may be called several times per tensor.
using ByteSink = std::function<void(const void* data, size_t nbytes)>;

struct TensorToWrite {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  // Must hand exactly numel × dtype_size bytes to the sink (checked).
  std::function<void(const ByteSink&)> write_bytes;

  uint64_t nbytes() const;
};

// A tensor whose bytes already sit in memory (they must outlive the write call).
TensorToWrite tensor_from_bytes(std::string name, Dtype dtype, std::vector<int64_t> shape, const void* data);

// Writes one safetensors file atomically. InputError for an invalid name
// (empty, duplicate, "__metadata__", not UTF-8) or a negative dimension.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes a checkpoint into `dir` like HF's save_pretrained: one model.safetensors
// when everything fits in `max_shard_bytes`, else shards filled in tensor order
// (a tensor larger than the limit gets a shard of its own) plus
// model.safetensors.index.json. Files of an earlier checkpoint in `dir` that the
// new one does not use (model.safetensors, stale shards, the index) are removed
// after the new files are in place. Returns the file names written, index last.
std::vector<std::string> write_safetensors_sharded(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                                   const std::map<std::string, std::string>& metadata,
                                                   uint64_t max_shard_bytes);

}  // namespace hpcrl::io
