// Vocab-parallel log-probs and entropy (vocab_logprobs.h).
//
// With s = logits − max and Z = Σ_v exp(s_v) over the whole vocabulary:
//   log p_v = s_v − log Z,   entropy H = −Σ_v p_v log p_v.
// Gradients w.r.t. the logits (z):
//   ∂ log p_t / ∂z_v = 1[v = t] − p_v,   ∂H / ∂z_v = −p_v (log p_v + H).
// The max is a constant shift (it cancels), so it needs no gradient.
#include "hpcrl/parallel/tensor/vocab_logprobs.h"

#include <torch/csrc/autograd/custom_function.h>

#include "hpcrl/util/check.h"

namespace hpcrl::parallel::tensor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class VocabParallelLogProbs : public torch::autograd::Function<VocabParallelLogProbs> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& local_logits, const at::Tensor& targets,
                               const dist::CommPtr& comm, int64_t vocab_start, bool with_entropy) {
    const int64_t local_vocab = local_logits.size(-1);
    at::Tensor z = local_logits.to(at::kFloat);  // [B, T, Vl]

    at::Tensor max = std::get<0>(z.max(-1)).contiguous();  // [B, T]
    dist::all_reduce(comm, max, dist::ReduceOp::kMax);
    at::Tensor shifted = z - max.unsqueeze(-1);
    at::Tensor sum_exp = shifted.exp().sum(-1).contiguous();  // [B, T]
    dist::all_reduce(comm, sum_exp, dist::ReduceOp::kSum);
    at::Tensor logp = shifted - sum_exp.log().unsqueeze(-1);  // [B, T, Vl] log-softmax over the full vocabulary

    at::Tensor in_range = (targets >= vocab_start) & (targets < vocab_start + local_vocab);  // [B, T]
    at::Tensor local_targets = (targets - vocab_start).masked_fill(~in_range, 0);
    at::Tensor target_logp = logp.gather(-1, local_targets.unsqueeze(-1)).squeeze(-1).masked_fill(~in_range, 0.0);
    // Both sums over the vocabulary travel in one all-reduce.
    at::Tensor sums = with_entropy ? at::stack({target_logp, (logp.exp() * logp).sum(-1)}) : target_logp.unsqueeze(0);
    sums = sums.contiguous();
    dist::all_reduce(comm, sums, dist::ReduceOp::kSum);
    at::Tensor logprobs = sums[0];
    at::Tensor entropy = with_entropy ? -sums[1] : at::zeros_like(logprobs);

    ctx->save_for_backward({logp, local_targets, in_range, entropy});
    ctx->saved_data["dtype"] = static_cast<int64_t>(local_logits.scalar_type());
    ctx->saved_data["with_entropy"] = with_entropy;
    return {logprobs, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& logp = saved[0];
    const at::Tensor& local_targets = saved[1];
    const at::Tensor& in_range = saved[2];
    const at::Tensor& entropy = saved[3];
    at::Tensor p = logp.exp();  // [B, T, Vl]
    at::Tensor g_lp = grads[0].to(at::kFloat);  // [B, T]
    at::Tensor grad = -p * g_lp.unsqueeze(-1);
    grad.scatter_add_(-1, local_targets.unsqueeze(-1), (g_lp * in_range.to(at::kFloat)).unsqueeze(-1));
    if (ctx->saved_data["with_entropy"].toBool() && grads[1].defined()) {
      at::Tensor g_h = grads[1].to(at::kFloat);
      grad -= g_h.unsqueeze(-1) * p * (logp + entropy.unsqueeze(-1));
    }
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TokenLogProbs vocab_parallel_logprobs(const at::Tensor& local_logits, const at::Tensor& targets,
                                      const dist::CommPtr& tp, int64_t vocab_start, bool with_entropy) {
  HPCRL_CHECK(local_logits.dim() == targets.dim() + 1 && local_logits.sizes().slice(0, targets.dim()) == targets.sizes(),
              "logits " << local_logits.sizes() << " do not match targets " << targets.sizes());
  HPCRL_CHECK(targets.scalar_type() == at::kLong, "targets must be int64, got " << targets.scalar_type());
  auto out = VocabParallelLogProbs::apply(local_logits, targets, tp, vocab_start, with_entropy);
  return {out[0], with_entropy ? out[1] : at::Tensor()};
}

}  // namespace hpcrl::parallel::tensor
