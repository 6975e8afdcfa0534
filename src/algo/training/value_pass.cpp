// The critic's forward-only value pass (see value_pass.h).
#include "hpcrl/algo/training/value_pass.h"

#include <torch/utils.h>

#include <algorithm>
#include <vector>

#include "hpcrl/algo/training/pipeline_train.h"

namespace hpcrl::algo {

at::Tensor forward_values(Role& role, const TokenBatch& b, const MicroBatchOptions& options) {
  torch::NoGradGuard no_grad;
  const int sp = role.ctx.sp_size();
  const int64_t B = b.rows();
  if (B == 0) return at::zeros(b.loss_mask.sizes(), b.loss_mask.options());
  const int64_t micro = options.max_rows > 0 ? options.max_rows : B;
  if (role.ctx.pp_size() > 1) {  // row micro-batches, the value head on the last stage
    TokenBatch sb = sequence_shard(b, role.ctx.sp_rank(), sp);
    auto head = [&](const at::Tensor& hidden, const at::Tensor&) { return role.model->values(hidden); };
    at::Tensor v = pipeline_forward_only(role, sb.ids, micro, head, {sb.ids.size(1)}, at::kFloat);  // [B, T/sp]
    return dist::all_gather(role.ctx.sp, v, 1);
  }
  auto head = [&](const at::Tensor& hidden, const TokenBatch&) { return role.model->values(hidden); };  // fp32
  return forward_per_token(role, b, options, head);  // [B, T]
}

}  // namespace hpcrl::algo
