// Activation checkpointing for LibTorch, which has no C++ utility for it: a
// custom autograd function runs a block without recording its graph, keeps
// only the block's inputs and the RNG state, and in the backward re-runs the
// block with the RNG state restored (so dropout masks and any sampling repeat
// exactly) and back-propagates through the recomputed graph. Parameters used
// inside the block receive their gradients from that inner backward, as with
// PyTorch's reentrant torch.utils.checkpoint; use Tensor::backward /
// torch::autograd::backward on the outer graph (not torch::autograd::grad).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace hpcrl::model {

using CheckpointFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// Runs fn(inputs) and returns its outputs; activations inside fn are recomputed
// in the backward. Inputs must be defined tensors (pass masks and tables that
// need no gradient through the closure). Outputs must be defined tensors.
std::vector<at::Tensor> checkpoint(const CheckpointFn& fn, const std::vector<at::Tensor>& inputs);

}  // namespace hpcrl::model
