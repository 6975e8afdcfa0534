// Whether attend() (attention_kernel.h) keeps the softmax probabilities of every
// query and key for the backward, in a header without ATen so that `hpcrl plan`
// (distributed/plan_memory.cpp) can size the activations of the build it runs in.
#pragma once

#include <torch/version.h>

namespace hpcrl::model {

// LibTorch 1.13 runs the explicit path (attend_reference), whose fp32 softmax
// output [B, H, Tq, Tk] is saved for the backward: per layer, H·Tk values a
// token, more than the layer's other activations from a few hundred tokens on.
// LibTorch 2.x runs at::scaled_dot_product_attention, whose fused kernels keep a
// log-sum-exp per query row instead.
constexpr bool kAttentionSavesScores = TORCH_VERSION_MAJOR < 2;

// LibTorch 2.0–2.4's kernels take as many KV heads as query heads: attend()
// repeats k and v for grouped-query attention, and the kernel saves the copies.
constexpr bool kAttentionRepeatsKvHeads = TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 5;

}  // namespace hpcrl::model
