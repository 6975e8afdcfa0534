// Token dispatch/combine for expert parallelism (protocol in the header). The
// splits must be known on the host before the variable all-to-all, so the
// counts exchange is followed by one small device-to-host copy per MoE layer;
// the permutations are built on the host from those counts.
#include "hpcrl/parallel/expert/token_dispatcher.h"

#include "hpcrl/parallel/expert/all_to_all.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::expert {
namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace

TokenDispatcher::TokenDispatcher(dist::CommPtr ep, int64_t num_experts)
    : ep_(std::move(ep)), num_experts_(num_experts) {
  const int size = ep_size();
  HPCRL_CHECK_INPUT(num_experts_ > 0, "expert parallelism needs num_experts > 0, got " << num_experts_);
  HPCRL_CHECK_INPUT(num_experts_ % size == 0,
                    "num_experts = " << num_experts_ << " is not divisible by ep = " << size
                                     << ": choose an ep that divides the number of experts");
  num_local_ = num_experts_ / size;
  first_local_ = (ep_ ? ep_->rank() : 0) * num_local_;
}

DispatchPlan TokenDispatcher::plan(const at::Tensor& expert_counts) const {
  HPCRL_CHECK(expert_counts.dim() == 1 && expert_counts.size(0) == num_experts_,
              "expert_counts must be [" << num_experts_ << "], got " << expert_counts.sizes());
  DispatchPlan plan;
  const std::vector<int64_t> mine = to_vector(expert_counts);  // [E]
  if (!ep_) {
    plan.send_counts = {0};
    for (int64_t c : mine) plan.send_counts[0] += c;
    plan.recv_counts = plan.send_counts;
    plan.local_expert_counts = mine;
    return plan;
  }
  const int size = ep_->size();
  const int64_t L = num_local_;
  // Chunk j of the result: how many rows rank j sends to each of my L experts.
  const std::vector<int64_t> theirs = to_vector(ep_->all_to_all(expert_counts.to(at::kLong).contiguous()));
  plan.send_counts.assign(size, 0);
  plan.recv_counts.assign(size, 0);
  plan.local_expert_counts.assign(L, 0);
  for (int r = 0; r < size; ++r) {
    for (int64_t l = 0; l < L; ++l) {
      plan.send_counts[r] += mine[r * L + l];
      plan.recv_counts[r] += theirs[r * L + l];
      plan.local_expert_counts[l] += theirs[r * L + l];
    }
  }
  if (L == 1) return plan;  // source-major already is expert-major
  // Offset of rank j's block for expert l in the received (source-major) rows.
  std::vector<int64_t> block_start(size * L);
  int64_t offset = 0;
  for (int r = 0; r < size; ++r) {
    for (int64_t l = 0; l < L; ++l) {
      block_start[r * L + l] = offset;
      offset += theirs[r * L + l];
    }
  }
  at::Tensor to_expert = at::empty({offset}, at::kLong);
  at::Tensor to_source = at::empty({offset}, at::kLong);
  int64_t* te = to_expert.data_ptr<int64_t>();
  int64_t* ts = to_source.data_ptr<int64_t>();
  int64_t i = 0;
  for (int64_t l = 0; l < L; ++l) {
    for (int r = 0; r < size; ++r) {
      for (int64_t k = 0; k < theirs[r * L + l]; ++k, ++i) {
        te[i] = block_start[r * L + l] + k;
        ts[te[i]] = i;
      }
    }
  }
  plan.to_expert_major = to_expert.to(expert_counts.device());
  plan.to_source_major = to_source.to(expert_counts.device());
  return plan;
}

at::Tensor TokenDispatcher::dispatch(const at::Tensor& rows, const DispatchPlan& plan) const {
  if (!ep_) return rows;
  at::Tensor received = all_to_all_rows(rows, ep_, plan.send_counts, plan.recv_counts);
  if (!plan.to_expert_major.defined()) return received;
  return received.index_select(0, plan.to_expert_major);
}

at::Tensor TokenDispatcher::combine(const at::Tensor& expert_rows, const DispatchPlan& plan) const {
  if (!ep_) return expert_rows;
  at::Tensor source_major =
      plan.to_source_major.defined() ? expert_rows.index_select(0, plan.to_source_major) : expert_rows;
  return all_to_all_rows(source_major, ep_, plan.recv_counts, plan.send_counts);
}

}  // namespace hpcrl::parallel::expert
