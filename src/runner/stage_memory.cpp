// Per-rank peak memory of a stage into metrics.jsonl (stage_memory.h).
#include "hpcrl/runner/stage_memory.h"

#include <spdlog/spdlog.h>

#ifdef HPCRL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <vector>

#include "hpcrl/trace/memory_peaks.h"

namespace hpcrl::runner {
namespace {

// This rank's {CUDA peak allocated, CUDA peak reserved, host peak RSS}; -1 where not measured.
std::vector<int64_t> own_peaks(bool cuda) {
  std::vector<int64_t> peaks = {-1, -1, trace::host_peak_rss_bytes().value_or(-1)};
#ifdef HPCRL_TORCH_CUDA
  if (cuda) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    // Index 0 is StatType::AGGREGATE (both pools) in every LibTorch 2.x.
    peaks[0] = stats.allocated_bytes[0].peak;
    peaks[1] = stats.reserved_bytes[0].peak;
  }
#else
  (void)cuda;  // a CPU-only build refuses run.device cuda before any stage
#endif
  return peaks;
}

bool on_cuda(const algo::StageEnv& env) {
  return env.pipeline && env.pipeline->run.device == config::Device::cuda;
}

}  // namespace

void reset_stage_memory_peaks(bool cuda) {
  static bool warned = false;
  if (!trace::reset_host_peak_rss() && !warned) {
    spdlog::warn("cannot reset the peak resident set (/proc/self/clear_refs); each stage's host peak in "
                 "metrics.jsonl is the process's peak since it started");
    warned = true;
  }
#ifdef HPCRL_TORCH_CUDA
  if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#else
  (void)cuda;
#endif
}

void write_stage_memory_peaks(const algo::StageEnv& env, int64_t step) {
  const std::vector<int64_t> mine = own_peaks(on_cuda(env));
  at::Tensor local = at::tensor(mine, at::kLong);
  at::Tensor all = dist::all_gather(env.world, local, 0);
  if (!env.metrics || !env.metrics->active()) return;
  const auto* v = all.data_ptr<int64_t>();
  const char* names[] = {trace::kCudaPeakAllocated, trace::kCudaPeakReserved, trace::kHostPeakRss};
  trace::Metrics line;
  for (int64_t rank = 0; rank < all.numel() / 3; ++rank)
    for (int k = 0; k < 3; ++k)
      if (v[rank * 3 + k] >= 0) line.emplace_back(trace::memory_metric(names[k], int(rank)), double(v[rank * 3 + k]));
  env.metrics->write(config::to_string(env.stage->kind), env.stage_index, step, line);
}

}  // namespace hpcrl::runner
