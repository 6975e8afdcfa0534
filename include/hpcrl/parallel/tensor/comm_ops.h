// Megatron's four conjugate autograd ops for tensor parallelism. Each is the
// other's transpose: what one does in the forward, its partner does in the
// backward, so gradients of a tp-split computation equal the single-rank ones.
//
//   copy_to_tp     forward: identity          backward: all-reduce (sum)
//   reduce_from_tp forward: all-reduce (sum)  backward: identity
//   gather_from_tp forward: all-gather (last dim)   backward: keep own chunk
//   scatter_to_tp  forward: keep own chunk (last dim) backward: all-gather
//
// The input of a column-parallel layer passes copy_to_tp (every rank uses the
// whole activation, each rank's backward sees only its columns' share of the
// gradient); the output of a row-parallel layer passes reduce_from_tp. A null
// or size-1 communicator makes every op the identity.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::tensor {

at::Tensor copy_to_tp(const at::Tensor& x, const dist::CommPtr& tp);
at::Tensor reduce_from_tp(const at::Tensor& x, const dist::CommPtr& tp);
at::Tensor gather_from_tp(const at::Tensor& x, const dist::CommPtr& tp);   // [..., n] -> [..., n·tp]
at::Tensor scatter_to_tp(const at::Tensor& x, const dist::CommPtr& tp);    // [..., n·tp] -> [..., n]

// Identity forward; backward sums the gradient over the ranks of `tp` that hold
// the same chunk (`index` of `chunks`) of a parameter replicated inside the tp
// group — GQA key/value heads when tp > kv heads — so every replica gets the
// gradient the single-rank parameter would have. With chunks = 1 every tp rank
// holds the whole parameter: the right op for a replicated weight applied to
// tp-split data (a per-head norm over this rank's heads).
at::Tensor sum_grad_over_replicas(const at::Tensor& param, const dist::CommPtr& tp, int64_t chunks, int64_t index);

}  // namespace hpcrl::parallel::tensor
