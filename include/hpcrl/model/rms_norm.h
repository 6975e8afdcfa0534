// RMSNorm as HF Llama/Qwen compute it: normalise in fp32, cast back to the
// input dtype, then scale by the weight. The weight is replicated over tp (each
// rank holds it whole and computes identical gradients from identical inputs) —
// except where the norm runs on tp-split data (qwen3's per-head q/k norm sees
// only this rank's heads): then `split_input_tp` sums the weight's gradient
// over tp in the backward.
#pragma once

#include <torch/nn/module.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::model {

class RmsNorm : public torch::nn::Module {
 public:
  RmsNorm(int64_t dim, double eps, dist::CommPtr split_input_tp = nullptr);
  at::Tensor forward(const at::Tensor& x);  // [..., dim] -> [..., dim]
  double eps() const { return eps_; }

  at::Tensor weight;  // [dim], initialised to 1

 private:
  double eps_;
  dist::CommPtr split_input_tp_;
};

// What RmsNorm::forward computes, with a weight of the caller's (the rollout
// engine's copy, which outlives a sharded model's gathered one); no gradient.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace hpcrl::model
