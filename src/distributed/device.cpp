// Binding each rank to its accelerator. With a CUDA LibTorch, rank i on a node
// takes cuda:<local rank>; when the launcher exposes a single device per rank
// (Slurm --gpus-per-task=1 sets CUDA_VISIBLE_DEVICES to one id) that is cuda:0.
// A CPU-only build asked for cuda fails with the fix, not a torch backtrace.
#include "hpcrl/distributed/bootstrap.h"

#ifdef HPCRL_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <spdlog/spdlog.h>
#endif

#include "hpcrl/util/check.h"

namespace hpcrl::dist {

int bind_device(config::Device device) {
  if (device == config::Device::cpu) return -1;
#ifdef HPCRL_TORCH_CUDA
  const WorldInfo& w = world();
  const int count = static_cast<int>(c10::cuda::device_count());
  HPCRL_CHECK_INPUT(count > 0, "device: cuda, but rank " << w.rank << " (node " << w.node
                                                         << ") sees no GPU; check CUDA_VISIBLE_DEVICES and the "
                                                            "launcher's GPU binding (srun --gpus-per-task), or set "
                                                            "run.device: cpu");
  const int index = count == 1 ? 0 : w.local_rank % count;
  if (count > 1 && w.local_size > count)
    spdlog::warn("{} ranks on node {} share {} GPUs: cuda:{} is used by more than one rank", w.local_size, w.node,
                 count, index);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  return index;
#else
  throw InputError(
      "device: cuda, but this hpcrl was built against a CPU-only LibTorch; rebuild with "
      "-DCMAKE_PREFIX_PATH=<CUDA LibTorch> (see README), or set run.device: cpu");
#endif
}

}  // namespace hpcrl::dist
