// The small-op chain `hpcrl calibrate` times for eager_op_s (calibrate_ops.h).
#include "cli/calibrate_ops.h"

#include <torch/utils.h>

#include "hpcrl/cost/op_counts.h"

namespace hpcrl::cli {

at::Tensor small_op_input(const at::TensorOptions& o) { return at::full({8, 64}, 0.5, o.dtype(at::kFloat)); }

at::Tensor small_op_chain(const at::Tensor& y, const at::Tensor& x) {
  at::Tensor h = at::mul(y, 0.5);                        // 1 scale
  h = at::add(h, x);                                     // 2 residual add
  at::Tensor r = at::pow(h, 2);                          // 3 RMS norm: square,
  r = at::mean(r, -1, /*keepdim=*/true);                 // 4 mean,
  r = at::add(r, 1e-6);                                  // 5 + eps,
  r = at::rsqrt(r);                                      // 6 rsqrt,
  h = at::mul(h, r);                                     // 7 scale
  h = at::silu(h);                                       // 8 activation
  h = at::softmax(h, -1);                                // 9 softmax
  return at::add(h, x);                                  // 10 residual add: back near x
}

double eager_op_seconds(const at::TensorOptions& o, const BestSeconds& best) {
  const at::Tensor x = small_op_input(o);
  small_op_chain(x, x).sum().item<float>();  // first use: kernels loaded, allocator warm
  const double sec = best([&] {
    at::Tensor y = x;
    for (int i = 0; i < kChainRounds; ++i) y = small_op_chain(y, x);
    y[0][0].item<float>();  // the one sync: every queued op has run
  });
  return sec / double(kChainRounds * kChainOps);
}

double train_op_seconds(const at::TensorOptions& o, const BestSeconds& best) {
  at::AutoGradMode recording(true);  // calibrate measures under no-grad
  const at::Tensor x = small_op_input(o).requires_grad_(true);
  small_op_chain(x, x).sum().backward();  // first use: the backward's kernels loaded too
  const double sec = best([&] {
    at::Tensor y = x;
    for (int i = 0; i < kChainRounds; ++i) y = small_op_chain(y, x);
    y.sum().backward();
    x.grad()[0][0].item<float>();  // the one sync: the backward's last op has run
    x.mutable_grad() = at::Tensor();  // each repeat starts without a gradient to accumulate into
  });
  return sec / (double(kChainRounds * kChainOps) * (1.0 + cost::kBackwardOpsPerForward));
}

}  // namespace hpcrl::cli
