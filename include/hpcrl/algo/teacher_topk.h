// The teacher side of logit distillation: per token, the teacher's k most
// likely next tokens and their log-probabilities, computed from its vocab-
// parallel logits (local top-k, all-gather of the candidates, global top-k;
// normaliser by max/sum all-reduces) — never the full [B, T, V] on one rank.
// The student side: its log-probabilities at given token ids, differentiable.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/algo/role.h"

namespace hpcrl::algo {

struct TopK {
  at::Tensor ids;      // [B, T, k] int64 vocabulary ids
  at::Tensor logprob;  // [B, T, k] float32, normalised over the full vocabulary
};

// hidden: the role's final hidden states [B, T, C]. Temperature divides the logits.
TopK vocab_parallel_topk(Role& role, const at::Tensor& hidden, int64_t k, double temperature);

// log p(ids) for each of the k ids per position: [B, T, k], differentiable.
at::Tensor logprobs_at(Role& role, const at::Tensor& hidden, const at::Tensor& ids, double temperature);

}  // namespace hpcrl::algo
