// The train/inference log-prob mismatch (logprob_mismatch.h).
#include "hpcrl/algo/objectives/logprob_mismatch.h"

#include <algorithm>

#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

MismatchSums mismatch_sums(const at::Tensor& trainer_logp, const at::Tensor& engine_logp, const at::Tensor& mask,
                           double& abs_max) {
  HPCRL_CHECK(trainer_logp.sizes() == engine_logp.sizes() && trainer_logp.sizes() == mask.sizes(),
              "mismatch_sums: trainer log-probs " << trainer_logp.sizes() << ", engine log-probs "
                                                  << engine_logp.sizes() << " and mask " << mask.sizes()
                                                  << " differ in shape");
  const at::Tensor m = mask.to(at::kDouble);
  const at::Tensor r = (trainer_logp.to(at::kDouble) - engine_logp.to(at::kDouble)) * m;  // 0 off the mask
  const at::Tensor k3 = (at::exp(r) - 1.0 - r) * m;  // 0 where r is 0 anyway
  MismatchSums s;
  s.abs_diff = r.abs().sum().item<double>();
  s.kl = k3.sum().item<double>();
  s.tokens = m.sum().item<double>();
  abs_max = r.numel() ? r.abs().max().item<double>() : 0.0;
  return s;
}

LogprobMismatch reduce_mismatch(const MismatchSums& local, double local_abs_max, const dist::CommPtr& dp) {
  at::Tensor sums = pack(local);
  at::Tensor peak = at::full({1}, local_abs_max, at::kDouble);
  dist::all_reduce(dp, sums);
  dist::all_reduce(dp, peak, dist::ReduceOp::kMax);
  return mismatch_of(unpack<MismatchSums>(sums), peak.item<double>());
}

LogprobMismatch mismatch_of(const MismatchSums& total, double abs_max) {
  const double tokens = std::max(1.0, total.tokens);
  return {total.abs_diff / tokens, abs_max, total.kl / tokens, total.tokens};
}

bool mismatch_pass_due(int64_t iteration, int64_t every) { return every > 0 && iteration % every == 0; }

std::vector<std::pair<std::string, double>> mismatch_metrics(const LogprobMismatch& m) {
  return {{"mismatch/logprob_abs_mean", m.abs_mean},
          {"mismatch/logprob_abs_max", m.abs_max},
          {"mismatch/kl", m.kl}};
}

}  // namespace hpcrl::algo
