// The torch side of checkpoints: at::Tensor in and out of safetensors files.
// A TensorStore opens a checkpoint (directory or file, single or sharded; see
// io/safetensors_dir.h) and copies tensors out of the memory-mapped files by
// their HF names. load_slice() copies only one rank's part of a tensor — for a
// dim-0 split a single contiguous byte range, for other dims one strided copy —
// so a tp/ep rank reads its own slice of the checkpoint and nothing else.
// Loaded tensors live on the CPU and own their memory (the mapping can close).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpcrl/io/safetensors.h"
#include "hpcrl/io/safetensors_dir.h"

namespace hpcrl::io {

// Safetensors dtype ↔ torch dtype. InputError starting with `where` (e.g.
// "FILE: tensor 'w'") when the other side has no such type (F8 needs
// LibTorch ≥ 2.1, U16/U32/U64 ≥ 2.3; complex tensors have no safetensors dtype).
at::ScalarType to_torch_dtype(Dtype d, const std::string& where);
Dtype from_torch_dtype(at::ScalarType t, const std::string& where);

class TensorStore {
 public:
  explicit TensorStore(const std::string& path);

  const SafetensorsDir& checkpoint() const { return dir_; }
  std::vector<std::string> names() const { return dir_.names(); }
  bool contains(const std::string& name) const { return dir_.contains(name); }
  const TensorInfo& info(const std::string& name) const { return dir_.info(name); }

  // The whole tensor, converted to `dtype` when given.
  at::Tensor load_tensor(const std::string& name, std::optional<at::ScalarType> dtype = std::nullopt) const;

  // Elements [start, start + length) along `dim` (negative dims count from the end).
  at::Tensor load_narrow(const std::string& name, int64_t dim, int64_t start, int64_t length,
                         std::optional<at::ScalarType> dtype = std::nullopt) const;

  // Part `index` of `parts` equal parts along `dim`: what tp/ep rank `index` holds.
  // InputError naming the tensor when the dim does not divide into `parts`.
  at::Tensor load_slice(const std::string& name, int64_t dim, int64_t index, int64_t parts,
                        std::optional<at::ScalarType> dtype = std::nullopt) const;

 private:
  std::string where(const std::string& name) const;  // "FILE: tensor 'NAME'", for errors

  SafetensorsDir dir_;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Saves tensors (any device; copied to the host one at a time while writing) as
// one safetensors file. metadata gets "format": "pt" unless it sets "format":
// transformers refuses a safetensors file whose metadata lacks it.
void save_tensors(const std::string& path, const NamedTensors& tensors,
                  std::map<std::string, std::string> metadata = {});

// HF's sharded layout in `dir` (see write_safetensors_sharded); returns file names.
std::vector<std::string> save_tensors_sharded(const std::string& dir, const NamedTensors& tensors,
                                              std::map<std::string, std::string> metadata, uint64_t max_shard_bytes);

}  // namespace hpcrl::io
