// Vocab-parallel embedding (vocab_embedding.h).
#include "hpcrl/parallel/tensor/vocab_embedding.h"

#include <torch/utils.h>

#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::tensor {

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab_size, int64_t dim, dist::CommPtr tp)
    : tp_(std::move(tp)), vocab_size_(vocab_size) {
  const int64_t n = tp_ ? tp_->size() : 1;
  const int64_t r = tp_ ? tp_->rank() : 0;
  HPCRL_CHECK_INPUT(vocab_size % n == 0, "vocabulary size " << vocab_size << " is not divisible by tp=" << n
                                                            << "; choose a tp that divides it");
  spec_ = ShardSpec{0, n, r};
  vocab_start_ = r * (vocab_size / n);
  weight = register_parameter("weight", torch::zeros({vocab_size / n, dim}));
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) {
  if (!tp_ || tp_->size() == 1) return at::embedding(weight, ids);
  const int64_t local = weight.size(0);
  at::Tensor outside = (ids < vocab_start_) | (ids >= vocab_start_ + local);  // [B, T]
  at::Tensor local_ids = (ids - vocab_start_).masked_fill(outside, 0);
  at::Tensor rows = at::embedding(weight, local_ids).masked_fill(outside.unsqueeze(-1), 0.0);  // [B, T, C]
  return reduce_from_tp(rows, tp_);
}

std::map<std::string, ShardSpec> VocabParallelEmbedding::shard_specs() const { return {{"weight", spec_}}; }

}  // namespace hpcrl::parallel::tensor
