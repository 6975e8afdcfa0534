// The conjugate tensor-parallel autograd ops (comm_ops.h). Communication
// buffers are made contiguous first: the communicator hands raw memory to MPI
// or NCCL.
#include "hpcrl/parallel/tensor/comm_ops.h"

#include <torch/csrc/autograd/custom_function.h>

#include "hpcrl/util/check.h"
#include "parallel/comm_capsule.h"

namespace hpcrl::parallel::tensor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor all_reduced(const at::Tensor& x, const dist::CommPtr& comm) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
  comm->all_reduce(out, dist::ReduceOp::kSum);
  return out;
}

// This rank's chunk of the last dimension.
at::Tensor own_chunk(const at::Tensor& x, const dist::CommPtr& comm) {
  const int64_t n = x.size(-1);
  HPCRL_CHECK(n % comm->size() == 0, "last dim " << n << " is not divisible by tp=" << comm->size());
  const int64_t w = n / comm->size();
  return x.narrow(-1, comm->rank() * w, w).contiguous();
}

at::Tensor gathered(const at::Tensor& x, const dist::CommPtr& comm) {
  return comm->all_gather(x.contiguous(), x.dim() - 1);
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommPtr& comm) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_reduced(g[0], detail::unpack_comm(ctx->saved_data["comm"])), at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, const dist::CommPtr& comm) {
    return all_reduced(x, comm);
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], at::Tensor()}; }
};

struct GatherFromTp : torch::autograd::Function<GatherFromTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommPtr& comm) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    return gathered(x, comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {own_chunk(g[0], detail::unpack_comm(ctx->saved_data["comm"])), at::Tensor()};
  }
};

struct ScatterToTp : torch::autograd::Function<ScatterToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommPtr& comm) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    return own_chunk(x, comm);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {gathered(g[0], detail::unpack_comm(ctx->saved_data["comm"])), at::Tensor()};
  }
};

struct SumGradOverReplicas : torch::autograd::Function<SumGradOverReplicas> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& p, const dist::CommPtr& comm, int64_t chunks,
                            int64_t index) {
    ctx->saved_data["comm"] = detail::pack_comm(comm);
    ctx->saved_data["chunks"] = chunks;
    ctx->saved_data["index"] = index;
    return p.view_as(p);
  }
  // Each rank writes its gradient into the slot of the chunk it holds; one
  // all-reduce then sums the replicas of every chunk at once.
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const int64_t chunks = ctx->saved_data["chunks"].toInt();
    const int64_t index = ctx->saved_data["index"].toInt();
    std::vector<int64_t> shape{chunks};
    for (int64_t s : g[0].sizes()) shape.push_back(s);
    at::Tensor slots = at::zeros(shape, g[0].options());
    slots[index].copy_(g[0]);
    detail::unpack_comm(ctx->saved_data["comm"])->all_reduce(slots, dist::ReduceOp::kSum);
    return {slots[index], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_tp(const at::Tensor& x, const dist::CommPtr& tp) {
  return detail::active(tp) ? CopyToTp::apply(x, tp) : x;
}
at::Tensor reduce_from_tp(const at::Tensor& x, const dist::CommPtr& tp) {
  return detail::active(tp) ? ReduceFromTp::apply(x, tp) : x;
}
at::Tensor gather_from_tp(const at::Tensor& x, const dist::CommPtr& tp) {
  return detail::active(tp) ? GatherFromTp::apply(x, tp) : x;
}
at::Tensor scatter_to_tp(const at::Tensor& x, const dist::CommPtr& tp) {
  return detail::active(tp) ? ScatterToTp::apply(x, tp) : x;
}
at::Tensor sum_grad_over_replicas(const at::Tensor& param, const dist::CommPtr& tp, int64_t chunks, int64_t index) {
  // With one chunk per rank there are no replicas to sum over.
  if (!detail::active(tp) || chunks == tp->size()) return param;
  return SumGradOverReplicas::apply(param, tp, chunks, index);
}

}  // namespace hpcrl::parallel::tensor
