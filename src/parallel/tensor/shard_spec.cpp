// ShardSpec helpers (shard_spec.h).
#include "hpcrl/parallel/tensor/shard_spec.h"

#include "hpcrl/util/check.h"

namespace hpcrl::parallel::tensor {

at::Tensor ShardSpec::slice(const at::Tensor& full) const {
  if (whole()) return full;
  HPCRL_CHECK(dim < full.dim() && full.size(dim) % chunks == 0,
              "tensor of shape " << full.sizes() << " cannot be cut into " << chunks << " chunks along dim " << dim);
  const int64_t w = full.size(dim) / chunks;
  return full.narrow(dim, index * w, w);
}

std::vector<int64_t> ShardSpec::local_shape(std::vector<int64_t> full_shape) const {
  if (!whole()) full_shape.at(dim) /= chunks;
  return full_shape;
}

std::string ShardSpec::describe() const {
  if (whole()) return "whole";
  return "dim " + std::to_string(dim) + ", chunk " + std::to_string(index) + " of " + std::to_string(chunks);
}

}  // namespace hpcrl::parallel::tensor
