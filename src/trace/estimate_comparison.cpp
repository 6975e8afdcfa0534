// The predicted-beside-measured table in JSON and Markdown (estimate_comparison.h).
#include "hpcrl/trace/estimate_comparison.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace hpcrl::trace {

namespace {
nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}

std::string cell(const char* fmt, double v) {
  if (!std::isfinite(v)) return "–";
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
}  // namespace

std::string comparison_json(const EstimateComparison& c) {
  nlohmann::ordered_json j;
  j["profile"] = c.profile;
  j["profile_path"] = c.profile_path;
  j["peak_flops"] = c.peak_flops;
  j["peak_bandwidth"] = c.peak_bandwidth;
  j["lengths"] = c.lengths;
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& r : c.rows) {
    nlohmann::ordered_json row;
    row["stage"] = r.stage;
    row["span"] = r.span;
    row["predicted_from"] = r.predicted_from;
    row["samples"] = r.samples;
    row["measured_s"] = number_or_null(r.measured_s);
    row["predicted_s"] = number_or_null(r.predicted_s);
    row["ratio"] = number_or_null(r.ratio());
    row["flops"] = r.flops;
    row["bytes"] = r.bytes;
    row["mfu"] = number_or_null(r.mfu);
    row["bandwidth_utilisation"] = number_or_null(r.bandwidth_utilisation);
    j["rows"].push_back(std::move(row));
  }
  return j.dump();
}

std::string comparison_markdown(const EstimateComparison& c) {
  std::ostringstream o;
  o << "\n## Predicted vs measured (" << c.profile << ")\n\n"
    << "Profile " << c.profile_path << ": peak " << cell("%.3g", c.peak_flops) << " FLOP/s, "
    << cell("%.3g", c.peak_bandwidth) << " B/s. Lengths: " << c.lengths << ".\n"
    << "Seconds per step/iteration: the measured median over steps and ranks, the estimate's; "
       "MFU and bandwidth utilisation against the profile's peaks.\n\n"
    << "| stage | span | measured s | predicted s | predicted / measured | MFU | decode bandwidth | samples | "
       "predicted from |\n|---|---|--:|--:|--:|--:|--:|--:|---|\n";
  for (const auto& r : c.rows)
    o << "| " << r.stage << " | " << r.span << " | " << cell("%.4g", r.measured_s) << " | "
      << cell("%.4g", r.predicted_s) << " | " << cell("%.2f", r.ratio()) << " | " << cell("%.1f %%", 100 * r.mfu)
      << " | " << cell("%.1f %%", 100 * r.bandwidth_utilisation) << " | " << r.samples << " | "
      << r.predicted_from << " |\n";
  return o.str();
}

}  // namespace hpcrl::trace
