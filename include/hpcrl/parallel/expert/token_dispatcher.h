// Moves routed tokens to the ranks that hold their experts and back (expert
// parallelism, docs/moe.md). Experts are sharded over the ep group: ep rank r
// holds global experts [r·L, (r+1)·L) with L = num_experts / ep. Every ep rank
// routes its own tokens; the exchange is
//   1. plan():     all-to-all of per-expert row counts (equal splits, E ints),
//                  from which both sides know every split of step 2;
//   2. dispatch(): variable-split all-to-all of the rows (sorted by global
//                  expert, so each destination's rows are contiguous), then a
//                  local permutation from source-major to expert-major order;
//   3. combine():  the inverse permutation and the reverse all-to-all.
// Both exchanges are differentiable (all_to_all_rows). With no ep
// communicator (ep size 1) nothing is exchanged and dispatch/combine return
// their input.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::expert {

// The splits of one dispatch/combine round trip.
struct DispatchPlan {
  std::vector<int64_t> send_counts;          // [ep] rows this rank sends to each ep rank
  std::vector<int64_t> recv_counts;          // [ep] rows this rank receives from each ep rank
  std::vector<int64_t> local_expert_counts;  // [L] rows per local expert after dispatch
  // Received rows arrive source-major ((rank 0: expert 0..L-1), (rank 1: ...));
  // experts want them expert-major. Undefined when the orders coincide.
  at::Tensor to_expert_major;  // [R_recv] int64: expert-major row i = received row to_expert_major[i]
  at::Tensor to_source_major;  // [R_recv] int64: the inverse permutation
};

class TokenDispatcher {
 public:
  // `ep` may be null (size 1). InputError unless num_experts % ep size == 0.
  TokenDispatcher(dist::CommPtr ep, int64_t num_experts);

  int64_t num_experts() const { return num_experts_; }
  int64_t num_local_experts() const { return num_local_; }
  int64_t first_local_expert() const { return first_local_; }
  int ep_size() const { return ep_ ? ep_->size() : 1; }

  // expert_counts: [E] int64, rows this rank routes to each global expert.
  // Collective over the ep group.
  DispatchPlan plan(const at::Tensor& expert_counts) const;
  // rows: [sum(expert_counts), C] sorted by global expert -> [sum(local_expert_counts), C]
  // grouped by local expert (within an expert: source ep rank order, then the source's order).
  at::Tensor dispatch(const at::Tensor& rows, const DispatchPlan& plan) const;
  // expert_rows: [sum(local_expert_counts), C] in dispatch()'s order -> [sum(expert_counts), C]
  // in the order of the rows given to dispatch().
  at::Tensor combine(const at::Tensor& expert_rows, const DispatchPlan& plan) const;

 private:
  dist::CommPtr ep_;
  int64_t num_experts_;
  int64_t num_local_;
  int64_t first_local_;
};

}  // namespace hpcrl::parallel::expert
