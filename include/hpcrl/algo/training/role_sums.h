// The two sums every stage step takes over a role's ranks: a step-wide count
// over the data-parallel replicas (the denominator of a globally normalised
// loss), and the statistics a step's loss accumulated, over all of the role's
// ranks (the numbers its metrics report). Collective over the named groups;
// identity where a group has one rank.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/step_sums.h"

namespace hpcrl::algo {

// Σ over the role's dp group of `local` (a copy when dp = 1).
at::Tensor sum_over_dp(const Role& role, const at::Tensor& local);
double sum_over_dp(const Role& role, double local);

// Values the loss side of forward_backward accumulated, summed into every rank
// of the role: at pp > 1 only the last stage computed them (the others hold
// zeros and take its numbers), then the sum over the gradient (dp·sp) group,
// whose ranks each saw their share of the step's tokens.
void sum_step_values(const Role& role, at::Tensor& values);

// The same for maxima: shared from the last pipeline stage, then max-reduced over the gradient group.
void max_step_values(const Role& role, at::Tensor& values);

template <class Sums>
Sums sum_step_sums(const Role& role, const Sums& local) {
  at::Tensor packed = pack(local);
  sum_step_values(role, packed);
  return unpack<Sums>(packed);
}

}  // namespace hpcrl::algo
