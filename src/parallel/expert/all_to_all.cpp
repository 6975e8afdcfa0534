// Differentiable variable-split all-to-all (see the header). The communicator
// is kept in the autograd context inside a capsule, because saved_data only
// holds IValues and the backward needs the same group the forward used.
#include "hpcrl/parallel/expert/all_to_all.h"

#include <torch/csrc/autograd/custom_function.h>

#include <numeric>

#include "hpcrl/util/check.h"

namespace hpcrl::parallel::expert {
namespace {

struct CommHolder : torch::CustomClassHolder {
  explicit CommHolder(dist::CommPtr c) : comm(std::move(c)) {}
  dist::CommPtr comm;
};

int64_t total(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

class AllToAllRows : public torch::autograd::Function<AllToAllRows> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rows,
                            const dist::CommPtr& comm, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts) {
    ctx->saved_data["comm"] = at::IValue::make_capsule(c10::make_intrusive<CommHolder>(comm));
    ctx->saved_data["send"] = send_counts;
    ctx->saved_data["recv"] = recv_counts;
    return comm->all_to_all(rows.contiguous(), send_counts, recv_counts);
  }

  // The reverse exchange: rows that came from rank j go back to rank j.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto holder = c10::static_intrusive_pointer_cast<CommHolder>(ctx->saved_data["comm"].toCapsule());
    auto send_counts = ctx->saved_data["send"].toIntVector();
    auto recv_counts = ctx->saved_data["recv"].toIntVector();
    at::Tensor grad_rows = holder->comm->all_to_all(grads[0].contiguous(), recv_counts, send_counts);
    return {grad_rows, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_rows(const at::Tensor& rows, const dist::CommPtr& comm,
                           const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& recv_counts) {
  HPCRL_CHECK(comm, "all_to_all_rows needs a communicator (ep size 1 does no exchange)");
  const auto n = static_cast<size_t>(comm->size());
  HPCRL_CHECK(send_counts.size() == n && recv_counts.size() == n,
              "split lists have " << send_counts.size() << " and " << recv_counts.size()
                                  << " entries for a group of " << n << " ranks");
  HPCRL_CHECK(rows.dim() >= 1 && rows.size(0) == total(send_counts),
              "send counts sum to " << total(send_counts) << " but rows has " << rows.size(0)
                                    << " rows");
  return AllToAllRows::apply(rows, comm, send_counts, recv_counts);
}

}  // namespace hpcrl::parallel::expert
