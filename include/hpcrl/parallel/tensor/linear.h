// Megatron's column- and row-parallel linear layers (weights in HF's
// [out_features, in_features] layout).
//
// ColumnParallelLinear splits the output features: rank r holds rows
// [r·out/tp, (r+1)·out/tp) of the weight and bias and produces that slice of the
// output. A column layer may also be cut into fewer chunks than tp ranks (GQA
// key/value projections when tp > kv heads): ranks r·chunks/tp then share a
// chunk, and their weight gradients are summed over the sharing ranks.
//
// RowParallelLinear splits the input features: rank r holds columns
// [r·in/tp, ...) and multiplies its slice of the input; the partial outputs are
// summed over tp (reduce_from_tp). A bias is added once, after the sum.
//
// Either layer may carry a LoRA adapter (add_lora; lora.h says how its factors
// are split), which forward() adds unless adapters are bypassed.
#pragma once

#include <torch/nn/module.h>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/parallel/tensor/lora.h"
#include "hpcrl/parallel/tensor/shard_spec.h"

namespace hpcrl::parallel::tensor {

class ColumnParallelLinear : public torch::nn::Module, public ShardedModule {
 public:
  // `chunks` = 0 means one chunk per tp rank.
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, dist::CommPtr tp, int64_t chunks = 0);

  // x: [..., in] replicated over tp -> [..., out / chunks]
  at::Tensor forward(const at::Tensor& x);
  // Same, for an input that already went through copy_to_tp (several column
  // layers reading one activation need only one backward all-reduce).
  at::Tensor forward_copied(const at::Tensor& x);

  std::map<std::string, ShardSpec> shard_specs() const override;
  int64_t local_out_features() const { return weight.size(0); }
  // Registers lora_A [r, in] (whole) and lora_B [out / chunks, r] (cut like weight), both zero.
  void add_lora(const LoraShape& shape);
  const LoraAdapter& lora() const { return lora_; }

  at::Tensor weight;  // [out / chunks, in]
  at::Tensor bias;    // [out / chunks] or undefined

 private:
  dist::CommPtr tp_;
  ShardSpec spec_;
  LoraAdapter lora_;
};

class RowParallelLinear : public torch::nn::Module, public ShardedModule {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, dist::CommPtr tp);

  // x: [..., in / tp] (this rank's slice) -> [..., out], summed over tp
  at::Tensor forward(const at::Tensor& x);

  std::map<std::string, ShardSpec> shard_specs() const override;
  // Registers lora_A [r, in / tp] (cut like weight) and lora_B [out, r] (whole), both zero.
  void add_lora(const LoraShape& shape);
  const LoraAdapter& lora() const { return lora_; }

  at::Tensor weight;  // [out, in / tp]
  at::Tensor bias;    // [out] (whole) or undefined

 private:
  dist::CommPtr tp_;
  ShardSpec spec_;
  LoraAdapter lora_;
};

}  // namespace hpcrl::parallel::tensor
