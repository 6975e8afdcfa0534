// Experience helpers (see rollout_batch.h).
#include "hpcrl/algo/rollout_batch.h"

#include <torch/torch.h>

#include "hpcrl/algo/pipeline_train.h"

namespace hpcrl::algo {

at::Tensor scatter_response_values(const TokenBatch& b, const std::vector<std::vector<float>>& values) {
  at::Tensor out = at::zeros(b.loss_mask.sizes(), at::kFloat);
  auto acc = out.accessor<float, 2>();
  for (int64_t i = 0; i < b.rows(); ++i) {
    const int64_t P = b.prompt_lens[i];
    for (size_t k = 0; k < values[i].size(); ++k) acc[i][P - 1 + k] = values[i][k];
  }
  return out.to(b.loss_mask.device());
}

at::Tensor forward_logprobs(Role& role, const TokenBatch& b, int64_t micro_batch) {
  torch::NoGradGuard no_grad;
  const int sp = role.ctx.sp_size();
  const int64_t B = b.rows();
  const int64_t micro = micro_batch > 0 ? micro_batch : B;
  if (role.ctx.pp_size() > 1) {  // the same micro-batches, through the role's pipeline
    TokenBatch sb = sequence_shard(b, role.ctx.sp_rank(), sp);
    at::Tensor lp = pipeline_logprobs(role, sb.ids, sb.targets, micro);  // [B, T/sp]
    if (sp > 1) lp = role.ctx.sp->all_gather(lp.contiguous(), 1);
    return lp * b.loss_mask;
  }
  std::vector<at::Tensor> parts;
  for (int64_t m = 0; m < B; m += micro) {
    TokenBatch mb = sequence_shard(slice_rows(b, m, std::min(B, m + micro)), role.ctx.sp_rank(), sp);
    auto out = role.model->forward(mb.ids);
    at::Tensor lp = role.model->token_logprobs(out.hidden, mb.targets, false).logprobs;  // [b, T/sp]
    if (sp > 1) lp = role.ctx.sp->all_gather(lp.contiguous(), 1);
    parts.push_back(lp);
  }
  return at::cat(parts, 0) * b.loss_mask;
}

Experience slice_experience(const Experience& e, int64_t begin, int64_t end) {
  Experience s;
  s.batch = slice_rows(e.batch, begin, end);
  s.old_logp = e.old_logp.slice(0, begin, end);
  if (e.ref_logp.defined()) s.ref_logp = e.ref_logp.slice(0, begin, end);
  s.advantages = e.advantages.slice(0, begin, end);
  s.scores = e.scores.slice(0, begin, end);
  s.correct.assign(e.correct.begin() + begin, e.correct.begin() + end);
  s.truncated.assign(e.truncated.begin() + begin, e.truncated.begin() + end);
  return s;
}

}  // namespace hpcrl::algo
