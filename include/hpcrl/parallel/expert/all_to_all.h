// The one communication primitive of expert parallelism: an all-to-all with
// variable splits along dim 0 that autograd can differentiate. Token dispatch
// and combine are both this op (combine is dispatch with the splits swapped),
// and the backward of each is the reverse exchange — so gradients of expert
// weights accumulate the contributions of every rank's tokens, and gradients
// of the dispatched rows travel back to the rank that sent them.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::expert {

// rows [sum(send_counts), ...] -> [sum(recv_counts), ...]: send_counts[i] rows go
// to rank i of `comm`, recv_counts[j] rows arrive from rank j (in rank order).
// Every rank of `comm` must call it (forward and, when grads flow, backward).
at::Tensor all_to_all_rows(const at::Tensor& rows, const dist::CommPtr& comm,
                           const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& recv_counts);

}  // namespace hpcrl::parallel::expert
