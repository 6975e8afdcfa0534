// Peak memory per rank and stage, as `hpcrl run` records it in metrics.jsonl
// (docs/tracing.md, "Peak memory"): at the end of every stage each rank's peaks
// since the stage began go to rank 0, which writes one line at the stage's last
// step with, per rank N,
//   memory/cuda_peak_allocated_bytes/rankN  run.device: cuda: the CUDA caching
//                                           allocator's peak allocated bytes
//                                           (tensors live at once)
//   memory/cuda_peak_reserved_bytes/rankN   ... and its peak reserved bytes (what
//                                           it held from the driver, cache included)
//   memory/host_peak_rss_bytes/rankN        every device: the process's peak
//                                           resident set (VmHWM of /proc/self/status),
//                                           the CPU counterpart: on run.device cpu
//                                           the tensors live there
// `hpcrl trace summarize` and `hpcrl report` show them per stage and rank beside
// `hpcrl plan`'s per-rank peak estimate (filled in by the CLI, which has the plan).
// Torch-free: the CUDA numbers are read by the runner (runner/stage_memory.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/trace/report_curves.h"

namespace hpcrl::trace {

inline constexpr const char* kCudaPeakAllocated = "cuda_peak_allocated_bytes";
inline constexpr const char* kCudaPeakReserved = "cuda_peak_reserved_bytes";
inline constexpr const char* kHostPeakRss = "host_peak_rss_bytes";

// "memory/<what>/rank<rank>": the metrics.jsonl key of one rank's peak.
std::string memory_metric(const std::string& what, int rank);

// This process's peak resident set in bytes (VmHWM of /proc/self/status);
// nullopt where the file has no such line (not Linux).
std::optional<int64_t> host_peak_rss_bytes();
// Starts the peak over at the current resident set (writes 5 to
// /proc/self/clear_refs, Linux 4.0+); false where the kernel refuses.
bool reset_host_peak_rss();

// One rank's peaks in one stage; NaN where not recorded (no CUDA numbers on a CPU run).
struct RankPeak {
  int rank = 0;
  double cuda_peak_allocated = std::nan("");
  double cuda_peak_reserved = std::nan("");
  double host_peak_rss = std::nan("");
  double plan_bytes = std::nan("");  // hpcrl plan's peak estimate for this rank; NaN when not known
  // What is compared with the plan: the CUDA allocator's peak allocated bytes on a
  // CUDA run, else the host peak resident set.
  double measured() const { return std::isfinite(cuda_peak_allocated) ? cuda_peak_allocated : host_peak_rss; }
  double measured_over_plan() const { return measured() / plan_bytes; }  // NaN when either is missing
};

struct StageMemory {
  std::string stage;  // "sft", "grpo", ...
  int stage_index = 0;
  std::vector<RankPeak> ranks;  // by rank
};

struct MemoryPeaks {
  std::vector<StageMemory> stages;  // by stage index
  // Where plan_bytes came from ("hpcrl plan of config.resolved.yaml for 2 ranks"),
  // or why there is none; "" until the CLI looks.
  std::string plan_note;
  bool empty() const { return stages.empty(); }
  int ranks() const;  // 1 + the highest rank with a peak
};

// The peaks in metrics.jsonl's lines. A stage with several memory lines (stopped
// and resumed) keeps each rank's largest value of each number.
MemoryPeaks memory_peaks_from_metrics(const std::vector<MetricsLine>& lines);

// One JSON object: {plan_note, stages: [{stage, stage_index, ranks: [{rank,
// cuda_peak_allocated_bytes, cuda_peak_reserved_bytes, host_peak_rss_bytes,
// plan_bytes, measured_over_plan}]}]} (NaN as null).
std::string memory_peaks_json(const MemoryPeaks& m);
// A Markdown section: a heading, what the columns are, one row per stage and rank.
std::string memory_peaks_markdown(const MemoryPeaks& m);
// The report page's section (id "memory-table"; a note saying why when there are no peaks).
std::string memory_peaks_html(const MemoryPeaks& m);

// "1.23 GiB" (binary units; "–" for NaN).
std::string bytes_text(double bytes);

}  // namespace hpcrl::trace
