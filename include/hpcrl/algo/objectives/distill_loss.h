// Token-level distillation divergences between teacher and student next-token
// distributions: forward KL(p_t‖p_s) (mode-covering, classic KD), reverse
// KL(p_s‖p_t) (mode-seeking, on-policy distillation), and generalised JSD(β)
// (GKD: β·KL(p_t‖m) + (1-β)·KL(p_s‖m), m = β·p_t + (1-β)·p_s).
// With top_k > 0 the sum runs over the teacher's k most likely tokens only,
// teacher probabilities renormalised there — full 150k-vocab distributions per
// token do not fit at scale.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "hpcrl/config/enums.h"

namespace hpcrl::algo {

using config::DistillLoss;  // forward_kl | reverse_kl | jsd, as the YAML spells it

// student_logits, teacher_logits: [N, V] (tokens flattened); returns [N] per-token divergence.
at::Tensor distill_divergence(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                              DistillLoss kind, double beta = 0.5, int64_t top_k = 0);

// The same divergences from log-probabilities on a common support [N, k] (e.g. the
// teacher's top-k tokens, gathered from vocab-parallel shards); both sides are
// renormalised over the support first.
at::Tensor distill_divergence_on_support(const at::Tensor& student_logp, const at::Tensor& teacher_logp,
                                         DistillLoss kind, double beta = 0.5);

}  // namespace hpcrl::algo
