// Low-rank adapters on the parallel linear layers (LoRA; PEFT's layout):
//   y = x·Wᵀ + (alpha / r) · dropout(x)·Aᵀ·Bᵀ,   A [r, in], B [out, r].
// The factors follow their layer's tp split, so no full activation moves:
//   column layer (out split): A is whole on every rank and B is cut like W's
//     rows; each rank's B-slice contributes to A's gradient, which is summed over tp;
//   row layer (in split): A is cut like W's columns and B is whole; the r-wide
//     x·Aᵀ is summed over tp before B, so B's gradient is complete on every rank.
// A layer registers its factors as submodules lora_A / lora_B holding `weight`,
// so named_parameters() are PEFT's keys without their "base_model.model." prefix
// ("model.layers.0.self_attn.q_proj.lora_A.weight").
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/parallel/tensor/shard_spec.h"

namespace hpcrl::parallel::tensor {

struct LoraShape {
  int64_t rank = 0;
  double alpha = 16;
  double dropout = 0;
  double scale() const { return alpha / double(rank); }
};

// One factor (A or B) of an adapter: this rank's slice of the full factor.
class LoraFactor : public torch::nn::Module, public ShardedModule {
 public:
  // Zeros of `local_shape` with the layer weight's dtype and device.
  LoraFactor(const std::vector<int64_t>& local_shape, ShardSpec spec, double scale, const at::TensorOptions& options);
  std::map<std::string, ShardSpec> shard_specs() const override { return {{"weight", spec_}}; }
  // alpha / r of the adapter this factor belongs to (merging needs it).
  double scale() const { return scale_; }

  at::Tensor weight;

 private:
  ShardSpec spec_;
  double scale_;
};

// While alive, every adapter on this thread is bypassed: the model computes its
// frozen base. A reference that is "the policy without its adapter" needs no
// second copy of the weights.
class AdaptersOff {
 public:
  AdaptersOff();
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

 private:
  bool saved_;
};
bool adapters_bypassed();

// The adapter of one linear layer (both factors null: none).
struct LoraAdapter {
  std::shared_ptr<LoraFactor> a, b;
  LoraShape shape;
  bool active() const { return a != nullptr && !adapters_bypassed(); }
  // dropout(x) when training with dropout > 0, else x.
  at::Tensor dropped(const at::Tensor& x, bool training) const;
};

// W + scale·B·A, computed in float32 and returned in W's dtype: the one merge
// that exports, weight syncs and the rollout engine use, so every merged copy
// of an adapted weight is the same. w [out, in], b [out, r], a [r, in] (full
// tensors or one rank's matching slices).
at::Tensor merge_lora(const at::Tensor& w, const at::Tensor& b, const at::Tensor& a, double scale);

// Full-tensor name of a LoRA factor ("….lora_A.weight" / "….lora_B.weight").
bool is_lora_tensor(const std::string& name);

}  // namespace hpcrl::parallel::tensor
