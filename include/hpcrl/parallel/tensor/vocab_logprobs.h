// Per-token log-probabilities of given target ids, and the entropy of each
// next-token distribution, computed from vocab-parallel logits without ever
// gathering the full [B, T, V] logits on one rank — RL memory depends on it
// (a 150k vocabulary at 4k tokens is 2.4 GB of fp32 logits per sequence).
//
// Each rank holds the logits of its vocabulary slice. The log-sum-exp is built
// from a max all-reduce and a sum all-reduce; the target's logit comes from the
// one rank whose slice contains it. One custom autograd function keeps only the
// local log-softmax for the backward, which needs no communication: the
// incoming gradients (of a loss computed identically on every tp rank) are
// already replicated. Computed in fp32 whatever the logits' dtype.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::tensor {

struct TokenLogProbs {
  at::Tensor logprobs;  // [B, T] float32: log p(target)
  at::Tensor entropy;   // [B, T] float32: -Σ p log p (undefined when not asked for)
};

// local_logits: [B, T, V/tp] (rank's slice, vocab ids [vocab_start, vocab_start + V/tp))
// targets: [B, T] int64 in [0, V). Differentiable w.r.t. local_logits.
TokenLogProbs vocab_parallel_logprobs(const at::Tensor& local_logits, const at::Tensor& targets,
                                      const dist::CommPtr& tp, int64_t vocab_start, bool with_entropy = true);

}  // namespace hpcrl::parallel::tensor
