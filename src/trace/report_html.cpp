// The report page (report.h): one HTML document with its CSS inline and the
// charts as inline SVG (report_charts.cpp, report_timeline_svg.cpp,
// report_curves_svg.cpp), so it can be mailed, attached to an issue or opened
// from a login node's scratch without a server, a script or the network. The
// training half comes first (report_training_html.cpp: learning curves, sample
// generations, config); then the observations, as the answer to "where did the
// time go", with the charts and tables as the evidence.
// Every chart and table has an id, and a section whose basis the run did not
// record keeps its id on a one-line note saying so.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "report_parts.h"

namespace hpcrl::trace {
namespace {

using namespace report;

const char* const kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
body { margin: 24px auto; max-width: 1040px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin: 0; } .warn { color: #a40; }
ol.observations li { margin: 4px 0; } .src { color: #777; font-size: 12px; margin-left: 6px; }
.absent { color: #777; font-style: italic; } .note { color: #666; font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; } th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; }
th { text-align: left; background: #f4f4f4; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
svg.chart { display: block; margin: 6px 0; font: 12px system-ui, sans-serif; }
svg .grid { stroke: #eee; } svg .axis { stroke: #888; } svg .axis-title { fill: #555; }
svg .lane { fill: #fafafa; stroke: #eee; } svg .rank-rule { stroke: #bbb; }
svg .in-bar { font-weight: 600; } svg .in-event { font-size: 10px; pointer-events: none; }
svg .series { font-weight: 600; }
h3 { font-size: 15px; margin: 18px 0 4px; } .curves { display: flex; flex-wrap: wrap; gap: 0 24px; }
svg .band { pointer-events: none; } .swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px; }
table.samples { width: 100%; table-layout: fixed; } table.samples th.n { width: 70px; }
table.samples td { vertical-align: top; } table.samples pre, details.config pre { margin: 0; white-space: pre-wrap;
  word-break: break-word; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
table.samples pre { max-height: 16em; overflow: auto; } details.config { margin: 4px 0; }
details.config pre { background: #f7f7f7; padding: 8px; border: 1px solid #e4e4e4; }
)";

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? format("%.0f B", b) : format("%.2f ", b) + units[u];
}

void header(std::ostringstream& os, const ReportData& d) {
  const Summary& s = d.summary;
  os << "<h1>hpcrl report: " << html_escape(d.run_name) << "</h1>\n<p class=\"meta\">" << html_escape(s.run_dir)
     << " · " << s.ranks.size() << (s.ranks.size() == 1 ? " rank" : " ranks") << " · wall " << seconds_text(s.wall_s)
     << " (longest rank) · " << s.events << " events in " << s.files.size() << " trace files · " << d.metrics_lines
     << " metrics lines</p>\n";
  for (const auto& f : s.files)
    if (f.skipped || !f.terminated)
      os << "<p class=\"meta warn\">" << html_escape(f.path)
         << (f.skipped ? ": the last event was cut off mid-write (crashed run?) and skipped"
                       : ": no closing ']' (the run crashed or is still running); every complete event was read")
         << "</p>\n";
  if (d.metrics_skipped)
    os << "<p class=\"meta warn\">metrics.jsonl: " << d.metrics_skipped
       << " lines that are not JSON objects were skipped</p>\n";
}

void observations(std::ostringstream& os, const ReportData& d) {
  os << "<h2>Observations</h2>\n";
  if (d.observations.empty()) {
    os << "<p id=\"observations\" class=\"absent\">No finding passed its threshold.</p>\n";
  } else {
    os << "<ol id=\"observations\" class=\"observations\">\n";
    for (const auto& o : d.observations)
      os << "<li>" << html_escape(o.text) << "<span class=\"src\">" << html_escape(o.span) << "</span></li>\n";
    os << "</ol>\n";
  }
  os << "<p class=\"note\">Ranked by the seconds each concerns. Reported when a phase is ≥ "
     << percent_text(kPhaseShareMin) << " of its iteration/step, a rank spends ≥ " << percent_text(kRankExcessMin)
     << " longer in a span than the ranks' mean, the pipeline bubble exceeds theory by ≥ "
     << format("%.0f", 100 * kBubbleExcessMin) << " points, a role waits ≥ " << percent_text(kRoleWaitMin)
     << " of its rounds, or a collective takes ≥ " << percent_text(kCollectiveShareMin)
     << " of the span it runs in; and the finding concerns ≥ " << percent_text(kMinWallShare)
     << " of the traced time.</p>\n";
}

void comm_table(std::ostringstream& os, const ReportData& d) {
  os << "<h2>Communication</h2>\n";
  if (d.summary.comm.empty()) {
    os << "<p id=\"comm-table\" class=\"absent\">No communicator calls were recorded (trace: {comm: true} records "
          "them).</p>\n";
    return;
  }
  os << "<table id=\"comm-table\">\n<tr><th>op</th><th>group</th><th class=\"n\">count</th><th class=\"n\">ranks</th>"
        "<th class=\"n\">total</th><th class=\"n\">mean</th><th class=\"n\">bytes</th><th class=\"n\">rate</th>"
        "<th class=\"n\">imbalance</th><th>mostly inside</th></tr>\n";
  for (const auto& c : d.summary.comm) {
    std::string inside = "–";
    for (const auto& p : d.comm_parents)
      if (p.op == c.op && p.group == c.group && !p.parent.empty())
        inside = p.parent + (p.parent_s > 0 ? " (" + percent_text(p.seconds / p.parent_s) + " of it)" : "");
    os << "<tr><td>" << html_escape(c.op) << "</td><td>" << html_escape(c.group.empty() ? "-" : c.group)
       << "</td><td class=\"n\">" << c.count << "</td><td class=\"n\">" << c.ranks << "</td><td class=\"n\">"
       << seconds_text(c.total_s) << "</td><td class=\"n\">" << seconds_text(c.mean_s) << "</td><td class=\"n\">"
       << human_bytes(c.bytes) << "</td><td class=\"n\">" << (c.bytes > 0 ? rate_text(c.gbytes_per_s) : "–")
       << "</td><td class=\"n\">" << format("%.2f", c.imbalance) << "</td><td>" << html_escape(inside)
       << "</td></tr>\n";
  }
  os << "</table>\n<p class=\"note\">Times summed over ranks; rate = bytes / total time; mostly inside: the span "
        "the collective spent most of its time in, and its share of that span.</p>\n";
}

// Spans recorded by two or more ranks, the largest excess of the slowest rank first.
void imbalance_table(std::ostringstream& os, const ReportData& d) {
  os << "<h2>Rank imbalance</h2>\n";
  struct Row {
    std::string span;
    size_t ranks;
    int64_t slowest;
    double slowest_s, mean_s, imbalance;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < d.rank_totals.size() && i < d.summary.spans.size(); ++i) {
    const RankTotals& rt = d.rank_totals[i];  // rank_totals follow Summary.spans one to one
    if (rt.seconds.size() < 2) continue;
    double sum = 0;
    auto slowest = rt.seconds.front();
    for (const auto& r : rt.seconds) sum += r.second, slowest = r.second > slowest.second ? r : slowest;
    rows.push_back({rt.span, rt.seconds.size(), slowest.first, slowest.second, sum / rt.seconds.size(),
                    d.summary.spans[i].imbalance});
  }
  if (rows.empty()) {
    os << "<p id=\"imbalance-table\" class=\"absent\">No span was recorded by two or more ranks.</p>\n";
    return;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.slowest_s - a.mean_s > b.slowest_s - b.mean_s; });
  os << "<table id=\"imbalance-table\">\n<tr><th>span</th><th class=\"n\">ranks</th><th class=\"n\">slowest rank</th>"
        "<th class=\"n\">its total</th><th class=\"n\">mean of ranks</th><th class=\"n\">imbalance</th></tr>\n";
  for (const auto& r : rows)
    os << "<tr><td>" << html_escape(r.span) << "</td><td class=\"n\">" << r.ranks << "</td><td class=\"n\">"
       << r.slowest << "</td><td class=\"n\">" << seconds_text(r.slowest_s) << "</td><td class=\"n\">"
       << seconds_text(r.mean_s) << "</td><td class=\"n\">" << format("%.2f", r.imbalance) << "</td></tr>\n";
  os << "</table>\n<p class=\"note\">imbalance: the slowest rank's total / the mean of the ranks that recorded "
        "the span (as in trace/summary.md); largest excess in seconds first.</p>\n";
  if (!d.rank_roles.empty())
    os << "<p class=\"note\">Ranks of different roles do different work; the observations compare only ranks of "
          "one role.</p>\n";
}

void roles_and_bubble(std::ostringstream& os, const ReportData& d) {
  os << "<h2>Roles</h2>\n";
  if (d.summary.roles.empty()) {
    os << "<p id=\"roles-table\" class=\"absent\">Colocated run: no stage ran roles on ranks of their own.</p>\n";
  } else {
    os << "<table id=\"roles-table\">\n<tr><th>stage</th><th>role</th><th class=\"n\">ranks</th><th "
          "class=\"n\">seconds</th>"
          "<th class=\"n\">busy</th><th class=\"n\">waiting for data</th><th class=\"n\">waiting for "
          "weights</th></tr>\n";
    for (const auto& r : d.summary.roles)
      os << "<tr><td>" << html_escape(r.stage) << "</td><td>" << html_escape(r.role) << "</td><td class=\"n\">"
         << r.ranks << "</td><td class=\"n\">" << seconds_text(r.seconds) << "</td><td class=\"n\">"
         << percent_text(r.busy) << "</td><td class=\"n\">" << percent_text(r.waiting_data) << "</td><td class=\"n\">"
         << percent_text(r.waiting_weights) << "</td></tr>\n";
    os << "</table>\n";
  }
  os << "<h2>Pipeline bubble</h2>\n";
  if (d.summary.bubbles.empty()) {
    os << "<p id=\"bubble-table\" class=\"absent\">No pipeline-parallel steps (pp/step spans) were recorded.</p>\n";
    return;
  }
  os << "<table id=\"bubble-table\">\n<tr><th class=\"n\">pp stage</th><th class=\"n\">ranks</th><th "
        "class=\"n\">steps</th>"
        "<th class=\"n\">p</th><th class=\"n\">m</th><th class=\"n\">mean step</th><th class=\"n\">measured</th>"
        "<th class=\"n\">theory</th></tr>\n";
  for (const auto& b : d.summary.bubbles)
    os << "<tr><td class=\"n\">" << b.stage << "</td><td class=\"n\">" << b.ranks << "</td><td class=\"n\">" << b.steps
       << "</td><td class=\"n\">" << format("%.0f", b.stages) << "</td><td class=\"n\">"
       << format("%.0f", b.microbatches) << "</td><td class=\"n\">" << seconds_text(b.mean_step_s)
       << "</td><td class=\"n\">" << percent_text(b.measured) << "</td><td class=\"n\">" << percent_text(b.theory)
       << "</td></tr>\n";
  os << "</table>\n";
}

// The caption under the timeline heading: which event was drawn and why.
std::string timeline_caption(const Timeline& t) {
  if (t.span.empty()) return "";
  std::string step = std::isnan(t.step) ? "" : " step " + format("%.0f", t.step);
  return "<p class=\"note\">" + html_escape(t.span) + step + " on rank " + std::to_string(t.rank) + ", " +
         seconds_text(t.window_s) + ": the median-duration one of " + std::to_string(t.candidates) +
         " events, with every rank's spans and collectives during it" +
         (t.dropped ? " (" + std::to_string(t.dropped) + " shortest events left out)" : "") +
         ". Hover an event for its duration.</p>\n";
}

}  // namespace

std::string render_report_html(const ReportData& d) {
  Palette palette(d);
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hpcrl report: "
     << html_escape(d.run_name) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  header(os, d);
  os << training_sections_html(d);
  if (d.runs.size() > 1)
    os << "<p class=\"note\">The sections below are of the first run, " << html_escape(d.runs.front().label)
       << ".</p>\n";
  observations(os, d);
  os << "<h2>Where each span's time went</h2>\n<p class=\"note\">Each bar is a span (summed over ranks) split into "
        "the spans that ran directly inside it; grey is time outside them.</p>\n"
     << stage_shares_svg(d, palette);
  os << "<h2>Time per iteration</h2>\n" << step_chart_svg(d.steps, false, "iteration-time");
  os << "<h2>Tokens per second</h2>\n" << step_chart_svg(d.steps, true, "tokens-per-s");
  os << "<h2>One step on every rank</h2>\n" << timeline_caption(d.timeline) << timeline_svg(d.timeline, palette);
  comm_table(os, d);
  imbalance_table(os, d);
  roles_and_bubble(os, d);
  os << estimate_section_html(d);
  os << memory_peaks_html(d.memory);
  os << "<p class=\"note\">Written by <code>hpcrl report</code> from trace/rank-*.json, metrics.jsonl, "
        "eval_samples.jsonl and config.resolved.yaml; "
        "docs/tracing.md defines every number.</p>\n</body>\n</html>\n";
  return os.str();
}

}  // namespace hpcrl::trace
