// The teacher's top-k pass, vocab-parallel top-k and log-probs at ids (see teacher_topk.h).
#include "hpcrl/algo/objectives/teacher_topk.h"

#include <torch/utils.h>

#include <algorithm>
#include <vector>

#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/parallel/tensor/vocab_logprobs.h"

namespace hpcrl::algo {

TopK vocab_parallel_topk(Role& role, const at::Tensor& hidden, int64_t k, double temperature) {
  at::Tensor local = role.model->local_logits(hidden, temperature).to(at::kFloat);  // [B, T, V/tp]
  const auto& tp = role.ctx.tp;
  // log Σ exp over the whole vocabulary from each shard's max and sum.
  at::Tensor mx = std::get<0>(local.max(-1, true));
  dist::all_reduce(tp, mx, dist::ReduceOp::kMax);
  at::Tensor sum = (local - mx).exp().sum(-1, true);
  dist::all_reduce(tp, sum);
  at::Tensor lse = mx + sum.log();  // [B, T, 1]

  const int64_t kk = std::min<int64_t>(k, local.size(-1));
  if (kk == local.size(-1) && !(tp && tp->size() > 1)) {
    // The whole vocabulary (top_k: 0): every id in vocabulary order. A top-k of
    // k = V sorts each row, which cost more than the rest of the pass.
    at::Tensor ids = at::arange(kk, local.options().dtype(at::kLong)).add_(role.model->vocab_start());
    return {ids.expand(local.sizes()), local - lse};
  }
  auto [vals, idx] = local.topk(kk, -1);  // [B, T, kk]
  idx = idx + role.model->vocab_start();
  if (tp && tp->size() > 1) {
    vals = tp->all_gather(vals.contiguous(), 2);  // [B, T, kk·tp]
    idx = tp->all_gather(idx.contiguous(), 2);
    auto [v2, pos] = vals.topk(k, -1);
    vals = v2;
    idx = idx.gather(-1, pos);
  }
  return {idx, vals - lse};
}

TopK teacher_topk(Role& teacher, const TokenBatch& batch, int64_t k, double temperature, MicroBatchOptions micro) {
  torch::NoGradGuard no_grad;
  const int sp = teacher.ctx.sp_size();
  // Ids and log-probs travel as one float64 tensor [.., 2·width] (ids below
  // 2^53 and float32 log-probs are exact in float64).
  const int64_t width = std::min(k, teacher.model->arch().vocab_size);
  auto joined = [&](const at::Tensor& hidden) {
    TopK t = vocab_parallel_topk(teacher, hidden, k, temperature);
    return at::cat({t.ids.to(at::kDouble), t.logprob.to(at::kDouble)}, -1);
  };
  at::Tensor both;  // [B, T, 2·width]
  if (teacher.ctx.pp_size() > 1) {
    TokenBatch sb = sequence_shard(batch, teacher.ctx.sp_rank(), sp);
    const int64_t rows = micro.max_rows > 0 ? micro.max_rows : batch.rows();
    both = pipeline_forward_only(
        teacher, sb.ids, rows, [&](const at::Tensor& hidden, const at::Tensor&) { return joined(hidden); },
        {sb.ids.size(1), 2 * width}, at::kDouble);
    both = dist::all_gather(teacher.ctx.sp, both, 1);
  } else {
    both = forward_per_token(teacher, batch, micro,
                             [&](const at::Tensor& hidden, const TokenBatch&) { return joined(hidden); });
  }
  return {both.narrow(-1, 0, width).to(at::kLong), both.narrow(-1, width, width).to(at::kFloat)};
}

at::Tensor logprobs_at(Role& role, const at::Tensor& hidden, const at::Tensor& ids, double temperature) {
  at::Tensor local = role.model->local_logits(hidden, temperature);  // [B, T, V/tp]
  if (role.ctx.tp_size() == 1) return local.to(at::kFloat).log_softmax(-1).gather(-1, ids);
  std::vector<at::Tensor> cols;
  for (int64_t j = 0; j < ids.size(-1); ++j)
    cols.push_back(parallel::tensor::vocab_parallel_logprobs(local, ids.select(-1, j), role.ctx.tp,
                                                              role.model->vocab_start(), false)
                       .logprobs);
  return at::stack(cols, -1);
}

}  // namespace hpcrl::algo
