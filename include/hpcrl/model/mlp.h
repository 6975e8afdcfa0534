// The dense SwiGLU feed-forward block, down(silu(gate(x)) · up(x)), split over
// tp Megatron-style: gate_proj and up_proj are column-parallel (each rank owns
// I/tp hidden units), down_proj is row-parallel (partial sums over tp), so the
// block needs one all-reduce forward and one backward.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/parallel/tensor/linear.h"

namespace hpcrl::model {

class Mlp : public torch::nn::Module {
 public:
  Mlp(int64_t hidden, int64_t intermediate, dist::CommPtr tp);
  at::Tensor forward(const at::Tensor& x);  // [..., C] -> [..., C], replicated over tp

  std::shared_ptr<parallel::tensor::ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<parallel::tensor::RowParallelLinear> down_proj;

 private:
  dist::CommPtr tp_;
};

}  // namespace hpcrl::model
