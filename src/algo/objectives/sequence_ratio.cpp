// GSPO's per-sequence mean log-ratio across layouts (see sequence_ratio.h).
#include "hpcrl/algo/objectives/sequence_ratio.h"

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

at::Tensor sequence_log_ratio(const at::Tensor& log_ratio, const at::Tensor& mask, const at::Tensor& rows,
                              const at::Tensor& row_tokens, const dist::CommPtr& sp) {
  HPCRL_CHECK(log_ratio.sizes() == mask.sizes() && log_ratio.sizes() == rows.sizes(),
              "log_ratio " << log_ratio.sizes() << ", mask " << mask.sizes() << ", rows " << rows.sizes());
  const int64_t n_rows = row_tokens.size(0);
  const at::Tensor m = mask.to(at::kDouble);
  const at::Tensor idx = rows.to(at::kLong).clamp(0, std::max<int64_t>(n_rows - 1, 0)).reshape({-1});
  // Sums in double: a long response's ratio is a small difference of many terms.
  at::Tensor sums = at::zeros({n_rows}, m.options());
  sums.index_add_(0, idx, (log_ratio.detach().to(at::kDouble) * m).reshape({-1}));
  dist::all_reduce(sp, sums);
  at::Tensor mean = sums / row_tokens.to(sums.options()).clamp_min(1.0);
  return (mean.index_select(0, idx).view(log_ratio.sizes()) * m).to(log_ratio.scalar_type());
}

}  // namespace hpcrl::algo
