// What `hpcrl calibrate` times for the per-op costs of the estimate (cost/hardware_profile.h):
//   eager_op_s               the chain below issued op by op (calibrate_ops.cpp): host dispatch, a fresh
//                            output from the allocator, the launch and the op, per op, one sync at the end;
//   train_op_s               the chain recorded for autograd and its backward run, per op as the estimate
//                            counts a training pass's ops (a forward op and kBackwardOpsPerForward backward ops);
//   graph_kernel_overhead_s  the same chain captured once in a CUDA graph and replayed (calibrate_graph.cpp,
//                            compiled only in CUDA builds): what a kernel costs with no host dispatch.
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace hpcrl::cli {

// Ops in one round of small_op_chain.
constexpr int kChainOps = 10;
// Rounds of the chain per timing: kChainRounds × kChainOps ops, then one sync.
constexpr int kChainRounds = 200;

// One round: kChainOps dependent out-of-place ops on `y` (each reads the previous one's output), the kinds a
// layer issues (scale, residual add, an RMS norm's pow, mean, add, rsqrt and product, SiLU, softmax, add),
// on `x`-sized small tensors; the result stays near `x`'s scale, so rounds can follow one another.
at::Tensor small_op_chain(const at::Tensor& y, const at::Tensor& x);

// The small tensor the chain runs on: [8, 64] fp32 (2 KiB: launch-bound on any device).
at::Tensor small_op_input(const at::TensorOptions& o);

// `best(fn)`: the best seconds of fn over repeats (calibrate's timer, agreed over the ranks).
using BestSeconds = std::function<double(const std::function<void()>&)>;

// Seconds per op of kChainRounds rounds of the chain, issued eagerly, with one device sync at the end.
double eager_op_seconds(const at::TensorOptions& o, const BestSeconds& best);

// Seconds per op of a training pass: kChainRounds rounds of the chain on a leaf that requires grad (autograd
// records each op), then the backward from their sum, one sync at the end; divided by the ops the estimate
// counts for them, kChainRounds · kChainOps · (1 + cost::kBackwardOpsPerForward) (op_counts.h).
double train_op_seconds(const at::TensorOptions& o, const BestSeconds& best);

#ifdef HPCRL_TORCH_CUDA
// Seconds per kernel of kChainRounds rounds of the chain captured once as a CUDA graph on a side stream
// and replayed, with one sync at the end (calibrate_graph.cpp). `o`: a CUDA device.
double graph_replay_op_seconds(const at::TensorOptions& o, const BestSeconds& best);
#endif

}  // namespace hpcrl::cli
