// Experience helpers (see rollout_batch.h).
#include "hpcrl/algo/training/rollout_batch.h"

#include <torch/utils.h>

#include <optional>

#include "hpcrl/algo/training/pipeline_train.h"

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

at::Tensor forward_logprobs(Role& role, const TokenBatch& b, const MicroBatchOptions& micro, double temperature) {
  torch::NoGradGuard no_grad;
  std::optional<parallel::tensor::AdaptersOff> base_only;  // a reference sharing the policy's base
  if (role.adapters_off) base_only.emplace();
  const int sp = role.ctx.sp_size();
  const int64_t B = b.rows();
  if (role.ctx.pp_size() > 1) {  // row micro-batches, through the role's pipeline
    TokenBatch sb = sequence_shard(b, role.ctx.sp_rank(), sp);
    at::Tensor lp = pipeline_logprobs(role, sb.ids, sb.targets, micro.max_rows > 0 ? micro.max_rows : B,
                                      temperature);  // [B, T/sp]
    lp = dist::all_gather(role.ctx.sp, lp, 1);
    return lp * b.loss_mask;
  }
  if (B == 0) return b.loss_mask.clone();
  auto head = [&](const at::Tensor& hidden, const TokenBatch& sb) {
    return role.model->token_logprobs(hidden, sb.targets, false, temperature).logprobs;  // [R, L/sp]
  };
  return forward_per_token(role, b, micro, head) * b.loss_mask;
}

}  // namespace hpcrl::algo
