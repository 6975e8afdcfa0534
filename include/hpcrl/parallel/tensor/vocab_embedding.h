// Vocab-parallel token embedding: rank r holds rows [r·V/tp, (r+1)·V/tp) of the
// [V, C] table, looks up the ids that fall in its range (zeros for the others)
// and the rows are summed over tp, so each id's vector comes from exactly one
// rank. The same row split is what a tied vocab-parallel LM head uses.
#pragma once

#include <torch/nn/module.h>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/parallel/tensor/shard_spec.h"

namespace hpcrl::parallel::tensor {

class VocabParallelEmbedding : public torch::nn::Module, public ShardedModule {
 public:
  VocabParallelEmbedding(int64_t vocab_size, int64_t dim, dist::CommPtr tp);

  // ids: [B, T] int64 in [0, V) -> [B, T, C], replicated over tp
  at::Tensor forward(const at::Tensor& ids);

  std::map<std::string, ShardSpec> shard_specs() const override;
  int64_t vocab_start() const { return vocab_start_; }
  int64_t local_vocab() const { return weight.size(0); }

  at::Tensor weight;  // [V / tp, C]

 private:
  dist::CommPtr tp_;
  int64_t vocab_size_;
  int64_t vocab_start_;
  ShardSpec spec_;
};

}  // namespace hpcrl::parallel::tensor
