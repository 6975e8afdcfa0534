// The teacher side of logit distillation: per token, the teacher's k most
// likely next tokens and their log-probabilities, computed from its vocab-
// parallel logits (local top-k, all-gather of the candidates, global top-k;
// normaliser by max/sum all-reduces) — never the full [B, T, V] on one rank.
// The student side: its log-probabilities at given token ids, differentiable.
// teacher_topk runs the teacher over a whole batch: micro-batch by micro-batch,
// or, for a pipelined teacher, forward-only through its pipeline with the
// top-k on the last stage, broadcast over pp.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/token_batch.h"

namespace hpcrl::algo {

struct TopK {
  at::Tensor ids;      // [B, T, k] int64 vocabulary ids
  at::Tensor logprob;  // [B, T, k] float32, normalised over the full vocabulary
};

// hidden: the role's final hidden states [B, T, C]. Temperature divides the logits.
// The k ids come most likely first, except when k covers the whole vocabulary:
// then every id, in vocabulary order (no sort).
TopK vocab_parallel_topk(Role& role, const at::Tensor& hidden, int64_t k, double temperature);

// The teacher's top-k for every position of `batch` [B, T] (no grad): ids and
// log-probs [B, T, min(k, V)] (0 past each row's end), sequence-parallel
// shards gathered back, on every rank of the role. Micro-batches as `micro`
// plans them for the teacher's sp (trimmed or packed); at pp > 1 rows of
// micro.max_rows (0: one) through the role's pipeline. Collective over the
// role's tp, sp, ep, pp.
TopK teacher_topk(Role& teacher, const TokenBatch& batch, int64_t k, double temperature, MicroBatchOptions micro);

// log p(ids) for each of the k ids per position: [B, T, k], differentiable.
at::Tensor logprobs_at(Role& role, const at::Tensor& hidden, const at::Tensor& ids, double temperature);

}  // namespace hpcrl::algo
