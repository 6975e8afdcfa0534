// RMSNorm (rms_norm.h): y = w · (x / sqrt(mean(x²) + eps)), statistics in fp32.
#include "hpcrl/model/rms_norm.h"

#include <torch/utils.h>

#include "hpcrl/parallel/tensor/comm_ops.h"

namespace hpcrl::model {

RmsNorm::RmsNorm(int64_t dim, double eps, dist::CommPtr split_input_tp)
    : eps_(eps), split_input_tp_(std::move(split_input_tp)) {
  weight = register_parameter("weight", torch::ones({dim}));
}

at::Tensor RmsNorm::forward(const at::Tensor& x) {
  at::Tensor w = split_input_tp_ ? parallel::tensor::sum_grad_over_replicas(weight, split_input_tp_, 1, 0) : weight;
  return rms_norm(x, w, eps_);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor x32 = x.to(at::kFloat);
  at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

}  // namespace hpcrl::model
