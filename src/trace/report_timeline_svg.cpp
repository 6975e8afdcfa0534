// The Gantt chart of the representative step (Timeline): one row group per
// rank lane (main, comm, pp stage k), nested spans stacked by depth as
// Perfetto draws them, every event a rectangle coloured by its name with its
// exact duration in a <title> tooltip, a time axis in milliseconds across the
// top and a legend of the names drawn, most time first.
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <sstream>

#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

constexpr double kWidth = 1000, kLabelWidth = 150, kRightPad = 16, kAxisHeight = 28;
constexpr double kDepthRow = 15, kLaneGap = 5;
constexpr size_t kMaxLegendNames = 40;  // the rest are the smallest slivers

std::string lane_name(int64_t lane) {
  if (lane == kMainLane) return "main";
  if (lane == kCommLane) return "comm";
  if (lane >= kPipelineLaneBase) return "pp stage " + std::to_string(lane - kPipelineLaneBase);
  return "lane " + std::to_string(lane);
}

// Axis ticks in ms (s for windows over 10 s) at 1, 2 or 5 times a power of ten.
void time_axis(std::ostringstream& os, double window_s, double plot_w, double bottom) {
  bool in_s = window_s > 10;
  double span = in_s ? window_s : window_s * 1e3;
  double raw = span / 10, p = std::pow(10.0, std::floor(std::log10(raw))), step = 10 * p;
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  for (double v = 0; v <= span * 1.0001; v += step) {
    double x = kLabelWidth + v / span * plot_w;
    os << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(kAxisHeight - 4) << "\" y2=\"" << px(bottom)
       << "\" class=\"grid\"/><text x=\"" << px(x) << "\" y=\"" << px(kAxisHeight - 8) << "\" text-anchor=\"middle\">"
       << format(step < 1 ? "%.2g" : "%.0f", v) << (v == 0 ? (in_s ? " s" : " ms") : "") << "</text>\n";
  }
}

// The event's tooltip: name, duration, where, and a collective's group and bytes.
std::string tooltip(const TimelineEvent& e) {
  std::string t = e.name + " — " + seconds_text(e.dur_s) + " at +" + seconds_text(e.start_s) + " (rank " +
                  std::to_string(e.rank) + " · " + lane_name(e.lane) + ")";
  if (e.comm) t += "; " + (e.group.empty() ? std::string("no group") : e.group) + ", " + format("%.0f", e.bytes) + " B";
  return html_escape(t);
}

void event_rect(std::ostringstream& os, const TimelineEvent& e, const Palette& palette, double lane_y, double scale) {
  double x = kLabelWidth + e.start_s * scale, w = std::max(0.6, e.dur_s * scale);
  double y = lane_y + kDepthRow * e.depth;
  os << "<rect x=\"" << px(x) << "\" y=\"" << px(y + 1) << "\" width=\"" << px(w) << "\" height=\"" << px(kDepthRow - 2)
     << "\" fill=\"" << palette.colour(e.name) << "\"><title>" << tooltip(e) << "</title></rect>\n";
  size_t fits = static_cast<size_t>((w - 6) / 6.2);  // characters of 10 px text that fit inside
  if (fits >= 4) {
    std::string label = e.name.size() <= fits ? e.name : e.name.substr(0, fits - 1) + "…";
    os << "<text x=\"" << px(x + 3) << "\" y=\"" << px(y + kDepthRow - 4) << "\" class=\"in-event\" fill=\""
       << ink_for(palette.colour(e.name)) << "\">" << html_escape(label) << "</text>\n";
  }
}

std::vector<std::string> legend_names(const Timeline& t) {
  std::map<std::string, double> seconds;
  for (const auto& e : t.events) seconds[e.name] += e.dur_s;
  std::vector<std::pair<std::string, double>> order(seconds.begin(), seconds.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> names;
  for (const auto& [name, s] : order)
    if (names.size() < kMaxLegendNames) names.push_back(name);
  return names;
}

}  // namespace

std::string timeline_svg(const Timeline& t, const Palette& palette) {
  if (t.events.empty() || t.window_s <= 0)
    return "<p id=\"timeline\" class=\"absent\">No span was recorded: there is no step to draw.</p>\n";
  const double plot_w = kWidth - kLabelWidth - kRightPad, scale = plot_w / t.window_s;
  std::map<std::pair<int64_t, int64_t>, double> lane_y;
  double y = kAxisHeight;
  for (const auto& lane : t.lanes) {
    lane_y[{lane.rank, lane.lane}] = y;
    y += kDepthRow * lane.depths + kLaneGap;
  }
  const double lanes_bottom = y;
  double legend_h = 0;
  std::string legend = legend_svg(legend_names(t), palette, 8, lanes_bottom + 12, kWidth - 16, legend_h);
  const double height = lanes_bottom + 16 + legend_h;
  std::ostringstream os;
  os << "<svg id=\"timeline\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
     << px(height) << "\" viewBox=\"0 0 " << kWidth << " " << px(height) << "\">\n";
  time_axis(os, t.window_s, plot_w, lanes_bottom);
  int64_t previous_rank = INT64_MIN;
  for (const auto& lane : t.lanes) {
    double ly = lane_y[{lane.rank, lane.lane}];
    if (lane.rank != previous_rank && previous_rank != INT64_MIN)
      os << "<line x1=\"0\" x2=\"" << kWidth << "\" y1=\"" << px(ly - kLaneGap / 2) << "\" y2=\""
         << px(ly - kLaneGap / 2) << "\" class=\"rank-rule\"/>\n";
    previous_rank = lane.rank;
    os << "<rect x=\"" << px(kLabelWidth) << "\" y=\"" << px(ly) << "\" width=\"" << px(plot_w) << "\" height=\""
       << px(kDepthRow * lane.depths) << "\" class=\"lane\"/>\n"
       << "<text x=\"8\" y=\"" << px(ly + 11) << "\" class=\"label\">rank " << lane.rank << " · "
       << html_escape(lane_name(lane.lane)) << "</text>\n";
  }
  for (const auto& e : t.events) event_rect(os, e, palette, lane_y[{e.rank, e.lane}], scale);
  os << legend << "</svg>\n";
  return os.str();
}

}  // namespace hpcrl::trace::report
