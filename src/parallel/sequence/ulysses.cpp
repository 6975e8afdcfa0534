// Ulysses all-to-all exchanges (ulysses.h). The communicator's all_to_all
// sends chunk i of dim 0 to rank i, so each exchange first moves the split
// dimension to the front, exchanges, and moves the received rank dimension to
// where it belongs.
#include "hpcrl/parallel/sequence/ulysses.h"

#include <torch/csrc/autograd/custom_function.h>

#include "hpcrl/util/check.h"
#include "parallel/comm_capsule.h"

namespace hpcrl::parallel::sequence {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [B, Tl, H, D] -> [B, sp·Tl, H/sp, D]
at::Tensor exchange_seq_to_heads(const at::Tensor& x, dist::Communicator& comm) {
  const int64_t n = comm.size(), B = x.size(0), Tl = x.size(1), H = x.size(2), D = x.size(3);
  HPCRL_CHECK(H % n == 0, "Ulysses: " << H << " heads on this rank are not divisible by sp=" << n);
  at::Tensor send = x.reshape({B, Tl, n, H / n, D}).permute({2, 0, 1, 3, 4}).contiguous();  // [sp, B, Tl, H/sp, D]
  at::Tensor recv = comm.all_to_all(send);  // chunk j: rank j's tokens, my head group
  return recv.permute({1, 0, 2, 3, 4}).reshape({B, n * Tl, H / n, D});
}

// [B, sp·Tl, h, D] -> [B, Tl, sp·h, D]
at::Tensor exchange_heads_to_seq(const at::Tensor& x, dist::Communicator& comm) {
  const int64_t n = comm.size(), B = x.size(0), T = x.size(1), h = x.size(2), D = x.size(3);
  HPCRL_CHECK(T % n == 0, "Ulysses: sequence length " << T << " is not divisible by sp=" << n);
  at::Tensor send = x.reshape({B, n, T / n, h, D}).permute({1, 0, 2, 3, 4}).contiguous();  // [sp, B, Tl, h, D]
  at::Tensor recv = comm.all_to_all(send);  // chunk j: my tokens, rank j's head group
  return recv.permute({1, 2, 0, 3, 4}).reshape({B, T / n, n * h, D});
}

struct SeqToHeads : torch::autograd::Function<SeqToHeads> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommPtr& comm) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    return exchange_seq_to_heads(x, *comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {exchange_heads_to_seq(g[0], *detail::unpack_comm(ctx->saved_data["comm"])), at::Tensor()};
  }
};

struct HeadsToSeq : torch::autograd::Function<HeadsToSeq> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommPtr& comm) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    return exchange_heads_to_seq(x, *comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {exchange_seq_to_heads(g[0], *detail::unpack_comm(ctx->saved_data["comm"])), at::Tensor()};
  }
};

}  // namespace

at::Tensor seq_to_heads(const at::Tensor& x, const dist::CommPtr& sp) {
  HPCRL_CHECK(x.dim() == 4, "seq_to_heads expects [B, T, H, D], got " << x.sizes());
  return detail::active(sp) ? SeqToHeads::apply(x, sp) : x;
}

at::Tensor heads_to_seq(const at::Tensor& x, const dist::CommPtr& sp) {
  HPCRL_CHECK(x.dim() == 4, "heads_to_seq expects [B, T, H, D], got " << x.sizes());
  return detail::active(sp) ? HeadsToSeq::apply(x, sp) : x;
}

at::Tensor gather_sequence(const at::Tensor& x, const dist::CommPtr& sp) {
  if (!detail::active(sp)) return x;
  at::NoGradGuard no_grad;
  return sp->all_gather(x.contiguous(), 1);
}

at::Tensor sequence_chunk(const at::Tensor& x, const dist::CommPtr& sp) {
  if (!detail::active(sp)) return x;
  const int64_t T = x.size(1);
  HPCRL_CHECK(T % sp->size() == 0, "sequence length " << T << " is not divisible by sp=" << sp->size());
  const int64_t w = T / sp->size();
  return x.narrow(1, sp->rank() * w, w);
}

}  // namespace hpcrl::parallel::sequence
