// SwiGLU MLP (mlp.h).
#include "hpcrl/model/mlp.h"

#include <torch/utils.h>

#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;

Mlp::Mlp(int64_t hidden, int64_t intermediate, dist::CommPtr tp) : tp_(std::move(tp)) {
  const int n = tp_ ? tp_->size() : 1;
  HPCRL_CHECK_INPUT(intermediate % n == 0, "tp=" << n << " does not divide intermediate_size " << intermediate
                                                 << "; choose a tp that divides it");
  gate_proj = register_module("gate_proj", std::make_shared<tensor::ColumnParallelLinear>(hidden, intermediate, false, tp_));
  up_proj = register_module("up_proj", std::make_shared<tensor::ColumnParallelLinear>(hidden, intermediate, false, tp_));
  down_proj = register_module("down_proj", std::make_shared<tensor::RowParallelLinear>(intermediate, hidden, false, tp_));
}

at::Tensor Mlp::forward(const at::Tensor& x) {
  at::Tensor xc = tensor::copy_to_tp(x, tp_);
  at::Tensor h = at::silu(gate_proj->forward_copied(xc)) * up_proj->forward_copied(xc);  // [..., I/tp]
  return down_proj->forward(h);
}

}  // namespace hpcrl::model
