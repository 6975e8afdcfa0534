// Facts of this build and of the sharded optimizer that `hpcrl plan`
// (distributed/plan_memory.cpp) sizes memory with. They are defined here, below
// model and optim, so that distributed reads them without including a higher
// layer; model/attention_saves_scores.h and optim/shard_layout.h bring them into
// their own namespaces, so each has one definition.
#pragma once

#include <cstdint>

#include <torch/version.h>

namespace hpcrl::dist {

// Whether attend() (model/attention_kernel.h) keeps the softmax probabilities
// of every query and key for the backward. LibTorch 1.13 runs the explicit path
// (attend_reference), whose fp32 softmax output [B, H, Tq, Tk] is saved for the
// backward: per layer, H·Tk values a token, more than the layer's other
// activations from a few hundred tokens on. LibTorch 2.x runs
// at::scaled_dot_product_attention, whose fused kernels keep a log-sum-exp per
// query row instead.
constexpr bool kAttentionSavesScores = TORCH_VERSION_MAJOR < 2;

// LibTorch 2.0–2.4's kernels take as many KV heads as query heads: attend()
// repeats k and v for grouped-query attention, and the kernel saves the copies.
constexpr bool kAttentionRepeatsKvHeads = TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 5;

// ZeRO-2's default buckets (optim.bucket_mb, as the dp all-reduce's; a larger
// parameter is a bucket of its own) and how many reduced buckets may wait at
// once (optim::GradReduceScatter).
constexpr int64_t kZero2BucketBytes = 8 << 20;
constexpr int kZero2BucketsInFlight = 2;

}  // namespace hpcrl::dist
