// Per-rank peak memory of a stage into metrics.jsonl (stage_memory.h).
#include "hpcrl/runner/stage_memory.h"

#include <spdlog/spdlog.h>

#ifdef HPCRL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/trace/memory_peaks.h"

namespace hpcrl::runner {
namespace {

// This rank's peaks in bytes, -1 where not measured (doubles, exact below 2^53 bytes, so that
// they gather as named fields through algo::pack).
struct RankPeaks {
  double cuda_allocated = -1, cuda_reserved = -1, host_rss = -1;
};

RankPeaks own_peaks(bool cuda) {
  RankPeaks peaks;
  peaks.host_rss = double(trace::host_peak_rss_bytes().value_or(-1));
#ifdef HPCRL_TORCH_CUDA
  if (cuda) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    // Index 0 is StatType::AGGREGATE (both pools) in every LibTorch 2.x.
    peaks.cuda_allocated = double(stats.allocated_bytes[0].peak);
    peaks.cuda_reserved = double(stats.reserved_bytes[0].peak);
  }
#else
  (void)cuda;  // a CPU-only build refuses run.device cuda before any stage
#endif
  return peaks;
}

void add_measured(trace::Metrics& line, const char* name, int rank, double bytes) {
  if (bytes >= 0) line.emplace_back(trace::memory_metric(name, rank), bytes);
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
  const at::Tensor all = dist::all_gather(env.world, algo::pack(own_peaks(on_cuda(env))), 0);
  if (!env.metrics || !env.metrics->active()) return;
  const int64_t fields = algo::sums_fields<RankPeaks>();
  trace::Metrics line;
  for (int64_t rank = 0; rank < all.numel() / fields; ++rank) {
    const RankPeaks p = algo::unpack<RankPeaks>(all.narrow(0, rank * fields, fields));
    add_measured(line, trace::kCudaPeakAllocated, int(rank), p.cuda_allocated);
    add_measured(line, trace::kCudaPeakReserved, int(rank), p.cuda_reserved);
    add_measured(line, trace::kHostPeakRss, int(rank), p.host_rss);
  }
  env.metrics->write(config::to_string(env.stage->kind()), env.stage_index, step, line);
}

}  // namespace hpcrl::runner
