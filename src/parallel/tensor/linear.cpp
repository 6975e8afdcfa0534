// Column- and row-parallel linear layers (linear.h). Parameters start at zero;
// the model fills them from full tensors (a checkpoint or a seeded init) cut
// with shard_specs(), so a layout never changes the numbers.
#include "hpcrl/parallel/tensor/linear.h"

#include <torch/utils.h>

#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::tensor {
namespace {
int size_of(const dist::CommPtr& c) { return c ? c->size() : 1; }
int rank_of(const dist::CommPtr& c) { return c ? c->rank() : 0; }
}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, bool with_bias, dist::CommPtr tp, int64_t chunks)
    : tp_(std::move(tp)) {
  const int64_t n = size_of(tp_);
  if (chunks == 0) chunks = n;
  HPCRL_CHECK(n % chunks == 0 || chunks % n == 0, "column layer: " << chunks << " chunks over tp=" << n);
  HPCRL_CHECK(chunks <= n, "column layer: " << chunks << " chunks for tp=" << n << " (each rank holds one chunk)");
  HPCRL_CHECK(out % chunks == 0, "column layer: out_features " << out << " not divisible into " << chunks << " chunks");
  spec_ = ShardSpec{0, chunks, rank_of(tp_) / (n / chunks)};
  weight = register_parameter("weight", torch::zeros({out / chunks, in}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out / chunks}));
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) { return forward_copied(copy_to_tp(x, tp_)); }

at::Tensor ColumnParallelLinear::forward_copied(const at::Tensor& x) {
  at::Tensor w = sum_grad_over_replicas(weight, tp_, spec_.chunks, spec_.index);
  at::Tensor b = bias.defined() ? sum_grad_over_replicas(bias, tp_, spec_.chunks, spec_.index) : at::Tensor();
  at::Tensor y = at::linear(x, w, b);
  if (!lora_.active()) return y;
  // A is whole on every rank: its gradient is the sum of every rank's B-slice's share.
  at::Tensor a = sum_grad_over_replicas(lora_.a->weight, tp_, /*chunks=*/1, /*index=*/0);
  at::Tensor bw = sum_grad_over_replicas(lora_.b->weight, tp_, spec_.chunks, spec_.index);
  return y + at::linear(at::linear(lora_.dropped(x, is_training()), a), bw) * lora_.shape.scale();
}

void ColumnParallelLinear::add_lora(const LoraShape& shape) {
  HPCRL_CHECK(!lora_.a, "this layer already has a LoRA adapter");
  lora_.shape = shape;
  lora_.a = register_module("lora_A", std::make_shared<LoraFactor>(std::vector<int64_t>{shape.rank, weight.size(1)},
                                                                   ShardSpec{}, shape.scale(), weight.options()));
  lora_.b = register_module("lora_B", std::make_shared<LoraFactor>(std::vector<int64_t>{weight.size(0), shape.rank},
                                                                   spec_, shape.scale(), weight.options()));
}

std::map<std::string, ShardSpec> ColumnParallelLinear::shard_specs() const {
  std::map<std::string, ShardSpec> m{{"weight", spec_}};
  if (bias.defined()) m["bias"] = spec_;
  return m;
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, bool with_bias, dist::CommPtr tp) : tp_(std::move(tp)) {
  const int64_t n = size_of(tp_);
  HPCRL_CHECK(in % n == 0, "row layer: in_features " << in << " not divisible by tp=" << n);
  spec_ = ShardSpec{1, n, rank_of(tp_)};
  weight = register_parameter("weight", torch::zeros({out, in / n}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out}));
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  at::Tensor y = reduce_from_tp(at::linear(x, weight), tp_);  // [..., out]
  if (lora_.active()) {
    // Summing the r-wide x·Aᵀ (not B's output) keeps the extra all-reduce small
    // and gives every rank the whole input of B, hence its whole gradient.
    at::Tensor u = reduce_from_tp(at::linear(lora_.dropped(x, is_training()), lora_.a->weight), tp_);  // [..., r]
    y = y + at::linear(u, lora_.b->weight) * lora_.shape.scale();
  }
  return bias.defined() ? y + bias : y;
}

void RowParallelLinear::add_lora(const LoraShape& shape) {
  HPCRL_CHECK(!lora_.a, "this layer already has a LoRA adapter");
  lora_.shape = shape;
  lora_.a = register_module("lora_A", std::make_shared<LoraFactor>(std::vector<int64_t>{shape.rank, weight.size(1)},
                                                                   spec_, shape.scale(), weight.options()));
  lora_.b = register_module("lora_B", std::make_shared<LoraFactor>(std::vector<int64_t>{weight.size(0), shape.rank},
                                                                   ShardSpec{}, shape.scale(), weight.options()));
}

std::map<std::string, ShardSpec> RowParallelLinear::shard_specs() const { return {{"weight", spec_}}; }

}  // namespace hpcrl::parallel::tensor
