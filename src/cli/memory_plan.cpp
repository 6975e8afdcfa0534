// hpcrl plan's per-rank peak beside the measured peaks (memory_plan.h).
#include "cli/memory_plan.h"

#include <filesystem>
#include <map>

#include "hpcrl/config/loader.h"
#include "hpcrl/distributed/plan.h"

namespace hpcrl::cli {

void add_plan_memory(trace::MemoryPeaks& m, const std::string& run_dir) {
  if (m.empty()) return;
  const int world = m.ranks();
  const std::string path = (std::filesystem::path(run_dir) / "config.resolved.yaml").string();
  if (!std::filesystem::exists(path)) {
    m.plan_note = path + " is missing, so there is no plan to compare with";
    return;
  }
  config::ValidateOptions opt;
  opt.world = world;
  const config::LoadResult res = config::check_pipeline_config(path, {}, opt);
  if (!res.ok()) {
    m.plan_note = path + " does not validate for " + std::to_string(world) +
                  " ranks (the ranks with peaks): " + res.diagnostics.errors.front().str();
    return;
  }
  std::map<int, double> plan_bytes;  // rank -> hpcrl plan's peak
  try {
    for (const auto& group : dist::rank_memory(dist::make_plan(res.config, world, world)))
      for (int r : group.ranks) plan_bytes[r] = double(group.peak());
  } catch (const std::exception& e) {
    m.plan_note = "hpcrl plan of " + path + " failed: " + e.what();
    return;
  }
  if (plan_bytes.empty()) {
    m.plan_note = "hpcrl plan has no memory estimate for this run's models (their architecture is not known)";
    return;
  }
  m.plan_note = "hpcrl plan's peak per rank (every role on the rank: resident state plus its largest transient part) "
                "for " + path + " on " + std::to_string(world) + (world == 1 ? " rank" : " ranks");
  for (auto& stage : m.stages)
    for (auto& r : stage.ranks)
      if (auto it = plan_bytes.find(r.rank); it != plan_bytes.end()) r.plan_bytes = it->second;
}

}  // namespace hpcrl::cli
