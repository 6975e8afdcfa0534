// How a rank's parameter is cut from the full (single-rank, HF-named) tensor.
// Parallel layers declare one ShardSpec per parameter, so loading a checkpoint
// reads only this rank's slice and saving one gathers the slices back — the
// layers, not the loader, know their layout.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace hpcrl::parallel::tensor {

struct ShardSpec {
  int64_t dim = -1;    // dimension of the full tensor that is split; -1: the rank holds it whole
  int64_t chunks = 1;  // equal chunks along `dim` (may be fewer than tp: chunks are then replicated)
  int64_t index = 0;   // the chunk this rank holds

  bool whole() const { return dim < 0 || chunks == 1; }
  // This rank's part of `full` (a view); InputError-free: the shape is checked by callers.
  at::Tensor slice(const at::Tensor& full) const;
  std::vector<int64_t> local_shape(std::vector<int64_t> full_shape) const;
  // "dim 0, chunk 1 of 4" for messages.
  std::string describe() const;
};

// Implemented by modules whose parameters are slices of full tensors. Keys are
// the module's own parameter names ("weight", "bias"); parameters not listed
// are held whole.
class ShardedModule {
 public:
  virtual ~ShardedModule() = default;
  virtual std::map<std::string, ShardSpec> shard_specs() const = 0;
};

}  // namespace hpcrl::parallel::tensor
