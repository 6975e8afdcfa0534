// Peak memory per rank and stage (memory_peaks.h): this process's peak resident
// set from /proc, the metrics.jsonl keys, and the table read back from them in
// JSON and Markdown.
#include "hpcrl/trace/memory_peaks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hpcrl::trace {

std::string memory_metric(const std::string& what, int rank) {
  return "memory/" + what + "/rank" + std::to_string(rank);
}

std::optional<int64_t> host_peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      int64_t kib = 0;
      if (fields >> kib) return kib * 1024;  // the kernel writes kB, meaning KiB
    }
  return std::nullopt;
}

bool reset_host_peak_rss() {
  int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;  // 5: reset the peak resident set to the current one
  ::close(fd);
  return ok;
}

int MemoryPeaks::ranks() const {
  int n = 0;
  for (const auto& s : stages)
    for (const auto& r : s.ranks) n = std::max(n, r.rank + 1);
  return n;
}

namespace {
// The field of `p` that a "memory/<what>/rank<N>" key's <what> names, or nullptr.
double* field_of(RankPeak& p, const std::string& what) {
  if (what == kCudaPeakAllocated) return &p.cuda_peak_allocated;
  if (what == kCudaPeakReserved) return &p.cuda_peak_reserved;
  if (what == kHostPeakRss) return &p.host_peak_rss;
  return nullptr;
}

// Splits "memory/<what>/rank<N>"; false for any other key.
bool parse_key(const std::string& key, std::string& what, int& rank) {
  if (key.rfind("memory/", 0) != 0) return false;
  const size_t slash = key.rfind('/');
  if (slash <= 7 || key.compare(slash + 1, 4, "rank") != 0) return false;
  const std::string digits = key.substr(slash + 5);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  what = key.substr(7, slash - 7);
  rank = std::stoi(digits);
  return true;
}

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}
}  // namespace

MemoryPeaks memory_peaks_from_metrics(const std::vector<MetricsLine>& lines) {
  std::map<int, StageMemory> stages;
  std::map<int, std::map<int, RankPeak>> ranks;  // stage index -> rank -> peaks
  for (const auto& line : lines)
    for (const auto& [key, value] : line.values) {
      std::string what;
      int rank = 0;
      RankPeak probe;
      if (!parse_key(key, what, rank) || !field_of(probe, what) || !std::isfinite(value)) continue;
      RankPeak& p = ranks[line.stage_index][rank];
      p.rank = rank;
      double* field = field_of(p, what);
      *field = std::isfinite(*field) ? std::max(*field, value) : value;
      stages[line.stage_index].stage = line.stage;
      stages[line.stage_index].stage_index = line.stage_index;
    }
  MemoryPeaks out;
  for (auto& [index, stage] : stages) {
    for (auto& [rank, peak] : ranks[index]) stage.ranks.push_back(peak);
    out.stages.push_back(std::move(stage));
  }
  return out;
}

std::string memory_peaks_json(const MemoryPeaks& m) {
  nlohmann::ordered_json j;
  j["plan_note"] = m.plan_note;
  j["stages"] = nlohmann::ordered_json::array();
  for (const auto& s : m.stages) {
    nlohmann::ordered_json stage;
    stage["stage"] = s.stage;
    stage["stage_index"] = s.stage_index;
    stage["ranks"] = nlohmann::ordered_json::array();
    for (const auto& r : s.ranks) {
      nlohmann::ordered_json row;
      row["rank"] = r.rank;
      row[kCudaPeakAllocated] = number_or_null(r.cuda_peak_allocated);
      row[kCudaPeakReserved] = number_or_null(r.cuda_peak_reserved);
      row[kHostPeakRss] = number_or_null(r.host_peak_rss);
      row["plan_bytes"] = number_or_null(r.plan_bytes);
      row["measured_over_plan"] = number_or_null(r.measured_over_plan());
      stage["ranks"].push_back(std::move(row));
    }
    j["stages"].push_back(std::move(stage));
  }
  return j.dump();
}

std::string bytes_text(double bytes) {
  if (!std::isfinite(bytes)) return "–";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char b[48];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return b;
}

namespace {
std::string ratio_text(double r) {
  if (!std::isfinite(r)) return "–";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", r);
  return b;
}
}  // namespace

std::string memory_peaks_markdown(const MemoryPeaks& m) {
  std::ostringstream o;
  o << "\n## Peak memory per rank\n\n"
    << "Per stage, from metrics.jsonl: the CUDA caching allocator's peak allocated and reserved bytes "
       "(run.device: cuda) and the process's peak resident set (VmHWM, every device). measured / plan: the "
       "CUDA peak allocated (on a CPU run the host peak resident set) over hpcrl plan's peak for the rank. "
    << (m.plan_note.empty() ? std::string("No plan estimate.") : "Plan: " + m.plan_note + ".") << "\n\n"
    << "| stage | rank | CUDA peak allocated | CUDA peak reserved | host peak RSS | plan estimate | measured / plan "
       "|\n|---|--:|--:|--:|--:|--:|--:|\n";
  for (const auto& s : m.stages)
    for (const auto& r : s.ranks)
      o << "| " << s.stage_index << "-" << s.stage << " | " << r.rank << " | " << bytes_text(r.cuda_peak_allocated)
        << " | " << bytes_text(r.cuda_peak_reserved) << " | " << bytes_text(r.host_peak_rss) << " | "
        << bytes_text(r.plan_bytes) << " | " << ratio_text(r.measured_over_plan()) << " |\n";
  return o.str();
}

}  // namespace hpcrl::trace
