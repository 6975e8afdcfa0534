// Distillation divergences (see distill_loss.h).
#include "hpcrl/algo/objectives/distill_loss.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
// KL(p‖q) summed over the last dim, from log-probabilities.
at::Tensor kl_from_logs(const at::Tensor& logp, const at::Tensor& logq) {
  return (logp.exp() * (logp - logq)).sum(-1);
}
}  // namespace

at::Tensor distill_divergence_on_support(const at::Tensor& student_logp, const at::Tensor& teacher_logp,
                                         DistillLoss kind, double beta) {
  at::Tensor ls = student_logp - student_logp.logsumexp(-1, true);
  at::Tensor lt = (teacher_logp - teacher_logp.logsumexp(-1, true)).detach();
  switch (kind) {
    case DistillLoss::forward_kl:
      return kl_from_logs(lt, ls);
    case DistillLoss::reverse_kl:
      return kl_from_logs(ls, lt);
    case DistillLoss::jsd: {
      HPCRL_CHECK_INPUT(beta > 0.0 && beta < 1.0, "jsd beta must be in (0, 1), got " << beta);
      at::Tensor lm = at::logaddexp(lt + std::log(beta), ls + std::log(1.0 - beta));
      return beta * kl_from_logs(lt, lm) + (1.0 - beta) * kl_from_logs(ls, lm);
    }
  }
  return ls.sum(-1);
}

at::Tensor distill_divergence(const at::Tensor& student_logits, const at::Tensor& teacher_logits, DistillLoss kind,
                              double beta, int64_t top_k) {
  HPCRL_CHECK_INPUT(student_logits.size(-1) == teacher_logits.size(-1),
                    "teacher vocabulary (" << teacher_logits.size(-1) << ") differs from the student's ("
                    << student_logits.size(-1) << "): distillation needs the same tokenizer");
  at::Tensor ls = student_logits.to(at::kFloat).log_softmax(-1);  // [N, V]
  at::Tensor lt = teacher_logits.to(at::kFloat).log_softmax(-1);
  if (top_k > 0 && top_k < ls.size(-1)) {
    at::Tensor idx = std::get<1>(lt.topk(top_k, -1));  // [N, k]
    lt = lt.gather(-1, idx);
    ls = ls.gather(-1, idx);
  }
  return distill_divergence_on_support(ls, lt, kind, beta);
}

}  // namespace hpcrl::algo
