// graph_kernel_overhead_s for `hpcrl calibrate --device cuda` (calibrate_ops.h): the small-op chain captured
// once as a CUDA graph and replayed, so each kernel pays the replay's launch gap and its own run, no host
// dispatch. Compiled only in CUDA builds (HPCRL_TORCH_CUDA); a CPU profile does not have the value.
#ifdef HPCRL_TORCH_CUDA

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cli/calibrate_ops.h"

namespace hpcrl::cli {

double graph_replay_op_seconds(const at::TensorOptions& o, const BestSeconds& best) {
  const at::Tensor x = small_op_input(o);
  at::cuda::CUDAGraph graph;
  {
    // Capture runs on a side stream (the default stream cannot be captured); a warm-up round first, so
    // nothing the capture records allocates or loads for the first time.
    c10::cuda::device_synchronize();  // x is written before the side stream reads it
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, o.device().index());
    const c10::cuda::CUDAStreamGuard guard(side);
    small_op_chain(x, x);
    side.synchronize();
    graph.capture_begin();
    at::Tensor y = x;
    for (int i = 0; i < kChainRounds; ++i) y = small_op_chain(y, x);
    graph.capture_end();
    side.synchronize();
  }
  graph.replay();
  c10::cuda::device_synchronize();
  const double sec = best([&] {
    graph.replay();
    c10::cuda::device_synchronize();  // the one sync: the replayed kernels have run
  });
  return sec / double(kChainRounds * kChainOps);
}

}  // namespace hpcrl::cli

#endif  // HPCRL_TORCH_CUDA
