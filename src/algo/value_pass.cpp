// The critic's forward-only value pass (see value_pass.h).
#include "hpcrl/algo/value_pass.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "hpcrl/algo/pipeline_train.h"

namespace hpcrl::algo {

at::Tensor forward_values(Role& role, const TokenBatch& b, const MicroBatchOptions& options) {
  torch::NoGradGuard no_grad;
  const int sp = role.ctx.sp_size();
  const int64_t B = b.rows(), T = b.ids.size(1);
  if (B == 0) return at::zeros(b.loss_mask.sizes(), b.loss_mask.options());
  const int64_t micro = options.max_rows > 0 ? options.max_rows : B;
  if (role.ctx.pp_size() > 1) {  // row micro-batches, the value head on the last stage
    TokenBatch sb = sequence_shard(b, role.ctx.sp_rank(), sp);
    auto head = [&](const at::Tensor& hidden, const at::Tensor&) { return role.model->values(hidden); };
    at::Tensor v = pipeline_forward_only(role, sb.ids, micro, head, {sb.ids.size(1)}, at::kFloat);  // [B, T/sp]
    return sp > 1 ? role.ctx.sp->all_gather(v.contiguous(), 1) : v;
  }
  MicroBatchOptions o = options;
  o.multiple = sp;
  std::vector<at::Tensor> parts;
  for (const MicroBatch& mb : plan_micro_batches(b, o)) {
    TokenBatch sb = sequence_shard(mb.tokens, role.ctx.sp_rank(), sp);
    at::Tensor v = role.model->values(forward_tokens(*role.model, sb).hidden);  // [R, L/sp] float32
    parts.push_back(mb.scatter(sp > 1 ? role.ctx.sp->all_gather(v.contiguous(), 1) : v, T));
  }
  return at::cat(parts, 0);  // [B, T]
}

}  // namespace hpcrl::algo
