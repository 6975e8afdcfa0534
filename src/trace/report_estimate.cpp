// The run beside the cost model on the report page (`hpcrl report --estimate
// PROFILE`; estimate_comparison.h defines the numbers): a table of predicted
// and measured seconds per span with MFU and decode's bandwidth share, and
// three kinds of observation, each only when its measured basis exists:
//   - a modelled span whose median seconds per step are off the prediction by
//     ≥ kEstimateOffMin (either way), ranked by the seconds of the difference;
//   - decode's share of the profile's memory bandwidth (the bytes a step must
//     read over the seconds it took), ranked by decode's seconds;
//   - the MFU of the training span with the most seconds, ranked by them.
#include <cmath>

#include "report_parts.h"

namespace hpcrl::trace::report {

namespace {
bool is_training(const std::string& span) {
  for (const char* s : {"/forward_backward", "/actor_update", "/critic_update", "/student_update"})
    if (span.size() > std::string(s).size() && span.compare(span.size() - std::string(s).size(), std::string::npos, s) == 0)
      return true;
  return false;
}

std::string flops_text(double flops_per_s) {
  if (flops_per_s >= 1e12) return format("%.0f TFLOP/s", flops_per_s / 1e12);
  return format("%.1f GFLOP/s", flops_per_s / 1e9);
}
}  // namespace

void estimate_observations(const ReportData& d, std::vector<Observation>& out) {
  const EstimateComparison& c = d.estimate;
  if (c.empty()) return;
  const double floor_s = kMinWallShare * d.summary.rank_wall_sum_s;
  const SpanComparison* longest_training = nullptr;
  for (const auto& r : c.rows) {
    if (!(r.samples > 0) || !std::isfinite(r.measured_s)) continue;
    const std::string unit = r.stage == "grpo" || r.stage == "ppo" ? "iteration" : "step";
    const double off = r.ratio() - 1;
    const double diff_s = std::fabs(r.measured_s - r.predicted_s) * double(r.samples);
    if (std::isfinite(off) && std::fabs(1 / r.ratio() - 1) >= kEstimateOffMin && diff_s >= floor_s)
      out.push_back({r.span + " takes " + seconds_text(r.measured_s) + " per " + unit + ", " +
                         format("%.2f", 1 / r.ratio()) + "× the cost model's " + seconds_text(r.predicted_s) + " on " +
                         c.profile + (off > 0 ? " (faster than modelled)" : " (slower than modelled)"),
                     r.span, diff_s});
    if (std::isfinite(r.bandwidth_utilisation) && r.measured_s * double(r.samples) >= floor_s)
      out.push_back({"decode (" + r.span + ") runs at " + percent_text(r.bandwidth_utilisation) + " of " + c.profile +
                         "'s memory bandwidth: " + format("%.3g", r.bytes / 1e9) + " GB of weights, KV cache and logits per " +
                         unit + " in " + seconds_text(r.measured_s),
                     r.span, r.measured_s * double(r.samples)});
    if (is_training(r.span) && std::isfinite(r.mfu) &&
        (!longest_training || r.measured_s * r.samples > longest_training->measured_s * longest_training->samples))
      longest_training = &r;
  }
  const SpanComparison* t = longest_training;
  if (t && t->measured_s * double(t->samples) >= floor_s)
    out.push_back({t->span + " runs at " + percent_text(t->mfu) + " MFU (" + flops_text(t->flops / t->measured_s) +
                       " of " + c.profile + "'s peak " + flops_text(c.peak_flops) + ")",
                   t->span, t->measured_s * double(t->samples)});
}

std::string estimate_section_html(const ReportData& d) {
  const EstimateComparison& c = d.estimate;
  std::string os = "<h2>Predicted vs measured</h2>\n";
  if (c.empty())
    return os + "<p id=\"estimate-table\" class=\"absent\">No hardware profile given: <code>hpcrl report RUN_DIR "
                "--estimate PROFILE</code> puts the cost model's prediction beside each span, with MFU and decode's "
                "share of the memory bandwidth.</p>\n";
  os += "<p class=\"note\">Profile " + html_escape(c.profile) + " (" + html_escape(c.profile_path) + "), peak " +
        flops_text(c.peak_flops) + " and " + rate_text(c.peak_bandwidth / 1e9) + "; lengths: " + html_escape(c.lengths) +
        ". Seconds per step or iteration: the measured median over steps and ranks beside the estimate.</p>\n";
  os += "<table id=\"estimate-table\">\n<tr><th>stage</th><th>span</th><th class=\"n\">measured</th>"
        "<th class=\"n\">predicted</th><th class=\"n\">predicted / measured</th><th class=\"n\">MFU</th>"
        "<th class=\"n\">decode bandwidth</th><th>predicted from</th></tr>\n";
  auto cell = [](double v, const std::string& text) { return std::isfinite(v) ? text : std::string("–"); };
  for (const auto& r : c.rows)
    os += "<tr><td>" + html_escape(r.stage) + "</td><td>" + html_escape(r.span) + "</td><td class=\"n\">" +
          cell(r.measured_s, seconds_text(r.measured_s)) + "</td><td class=\"n\">" +
          cell(r.predicted_s, seconds_text(r.predicted_s)) + "</td><td class=\"n\">" +
          cell(r.ratio(), format("%.2f", r.ratio())) + "</td><td class=\"n\">" + cell(r.mfu, percent_text(r.mfu)) +
          "</td><td class=\"n\">" + cell(r.bandwidth_utilisation, percent_text(r.bandwidth_utilisation)) +
          "</td><td>" + html_escape(r.predicted_from) + "</td></tr>\n";
  os += "</table>\n<p class=\"note\">MFU: the estimate's matmul FLOPs of the span on one rank (2 per multiply-add) "
        "over the measured seconds and the profile's peak; decode bandwidth: the bytes a decode step must read "
        "(weights, KV cache, logits) over the measured seconds and the profile's peak bandwidth.</p>\n";
  return os;
}

}  // namespace hpcrl::trace::report
