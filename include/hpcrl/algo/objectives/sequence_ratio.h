// GSPO's sequence-level importance ratio, s_i = exp((1/|y_i|) Σ_t (logp − old_logp)),
// for a micro-batch whose tokens may be packed (several sequences in a row) and
// cut over sequence-parallel ranks: a sequence's tokens are not all in one row
// of one rank, so the per-sequence sum is taken over the micro-batch's layout
// and then over the sp group.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

// log_ratio, mask, rows: this rank's chunk of a micro-batch, [R, L]; rows holds
// each token's sequence index in [0, n_rows) (anything where mask is 0).
// row_tokens: [n_rows] each sequence's response-token count over all ranks.
// Returns [R, L]: at each token its sequence's mean log-ratio, without
// gradient. Collective over `sp` (every sp rank calls it for the same
// micro-batch); a null or one-rank sp needs no communication.
at::Tensor sequence_log_ratio(const at::Tensor& log_ratio, const at::Tensor& mask, const at::Tensor& rows,
                              const at::Tensor& row_tokens, const dist::CommPtr& sp);

}  // namespace hpcrl::algo
