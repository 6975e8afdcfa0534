// The report's SVG charts other than the timeline: the stacked bars of span
// shares, and the per-iteration line charts; and what all charts share, the
// palette and the legend. Every chart is plain SVG with <title> tooltips, so a
// browser shows the exact numbers on hover without any script.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

// Tableau's 10 colours, then the 10 from Tableau 20 and d3's category20 that
// differ most (CIELAB distance) from those already taken: neighbours in the
// span tree get neighbouring entries, and no two entries look alike.
const char* const kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                                "#ff9da7", "#9c755f", "#bab0ac", "#6b6ecf", "#dbdb8d", "#ffbb78", "#e377c2",
                                "#e6550d", "#843c39", "#636363", "#aec7e8", "#637939", "#98df8a"};
constexpr size_t kColourCount = sizeof kColours / sizeof kColours[0];
const char* const kUntracedColour = "#e8e8e8";  // time a span spent outside the spans inside it
constexpr double kCharWidth = 6.8;              // of 12 px sans-serif, for laying out labels

std::string axis_number(double v) {
  if (v == 0) return "0";
  double a = std::fabs(v);
  return format(a >= 100 ? "%.0f" : a >= 1 ? "%.3g" : "%.2g", v);
}

}  // namespace

std::string series_colour(size_t i) {
  return kColours[i % kColourCount];
}

Palette::Palette(const ReportData& d) {
  for (const auto& st : d.summary.spans) names_.push_back(st.name);
  for (const auto& c : d.summary.comm)
    if (std::find(names_.begin(), names_.end(), c.op) == names_.end()) names_.push_back(c.op);
}

std::string Palette::colour(const std::string& name) const {
  if (name.empty()) return kUntracedColour;
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it != names_.end() && static_cast<size_t>(it - names_.begin()) < kColourCount)
    return kColours[it - names_.begin()];
  // Beyond the palette: a hue from the name, so a name keeps its colour between runs.
  return "hsl(" + std::to_string(std::hash<std::string>{}(name) % 360) + ",55%,60%)";
}

std::string legend_svg(const std::vector<std::string>& names, const Palette& palette, double x, double y, double width,
                       double& height) {
  std::ostringstream os;
  double cx = x, cy = y;
  constexpr double kRow = 18;
  for (const auto& name : names) {
    std::string label = name.empty() ? "outside the spans inside it" : name;
    double w = 18 + kCharWidth * static_cast<double>(label.size()) + 16;
    if (cx > x && cx + w > x + width) cx = x, cy += kRow;
    os << "<rect x=\"" << px(cx) << "\" y=\"" << px(cy) << "\" width=\"12\" height=\"12\" fill=\""
       << palette.colour(name) << "\" stroke=\"#888\" stroke-width=\"0.5\"/>"
       << "<text x=\"" << px(cx + 17) << "\" y=\"" << px(cy + 10.5) << "\">" << html_escape(label) << "</text>\n";
    cx += w;
  }
  height = names.empty() ? 0 : cy - y + kRow;
  return os.str();
}

namespace {

// One bar: label (indented by depth) and total at the sides, parts as
// segments, the untraced rest in grey.
void share_bar(std::ostringstream& os, const ShareBar& bar, const Palette& palette, double y, double x0, double w) {
  constexpr double kHeight = 22;
  os << "<text x=\"" << px(8 + 12.0 * bar.depth) << "\" y=\"" << px(y + 15) << "\" class=\"label\">"
     << html_escape(bar.span) << "</text>\n";
  std::vector<std::pair<std::string, double>> parts = bar.parts;
  double traced = 0;
  for (const auto& p : parts) traced += p.second;
  if (bar.total_s > traced) parts.emplace_back("", bar.total_s - traced);
  double x = x0;
  for (const auto& [name, seconds] : parts) {
    double share = bar.total_s > 0 ? std::min(1.0, seconds / bar.total_s) : 0;
    double sw = std::min(share * w, x0 + w - x);
    std::string what = name.empty() ? "outside the spans inside it" : name;
    os << "<rect x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\"" << px(std::max(0.0, sw)) << "\" height=\""
       << px(kHeight) << "\" fill=\"" << palette.colour(name) << "\"><title>" << html_escape(what) << ": "
       << percent_text(share) << " of " << html_escape(bar.span) << " (" << seconds_text(seconds)
       << ")</title></rect>\n";
    if (sw >= 40)
      os << "<text x=\"" << px(x + sw / 2) << "\" y=\"" << px(y + 15)
         << "\" text-anchor=\"middle\" class=\"in-bar\" fill=\"" << ink_for(palette.colour(name)) << "\">"
         << percent_text(share) << "</text>\n";
    x += sw;
  }
  os << "<text x=\"" << px(x0 + w + 8) << "\" y=\"" << px(y + 15) << "\">" << seconds_text(bar.total_s) << "</text>\n";
}

}  // namespace

std::string stage_shares_svg(const ReportData& d, const Palette& palette) {
  if (d.shares.empty())
    return "<p id=\"stage-shares\" class=\"absent\">No span ran inside another: nothing to break down.</p>\n";
  constexpr double kWidth = 1000, kLabel = 300, kTotal = 70, kRow = 30;
  std::vector<std::string> names;
  for (const auto& bar : d.shares)
    for (const auto& p : bar.parts)
      if (std::find(names.begin(), names.end(), p.first) == names.end()) names.push_back(p.first);
  names.push_back("");
  double legend_h = 0;
  double bars_h = kRow * static_cast<double>(d.shares.size());
  std::string legend = legend_svg(names, palette, 8, bars_h + 14, kWidth - 16, legend_h);
  std::ostringstream os;
  os << "<svg id=\"stage-shares\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth
     << "\" height=\"" << px(bars_h + 24 + legend_h) << "\" viewBox=\"0 0 " << kWidth << " "
     << px(bars_h + 24 + legend_h) << "\">\n";
  for (size_t i = 0; i < d.shares.size(); ++i)
    share_bar(os, d.shares[i], palette, 4 + kRow * static_cast<double>(i), kLabel, kWidth - kLabel - kTotal);
  os << legend << "</svg>\n";
  return os.str();
}

namespace {

struct Plot {
  double left = 80, right = 20, top = 16, bottom = 44, width = 1000, height = 280;
  double x_min = 0, x_max = 1, y_max = 1;
  double x(double v) const { return left + (v - x_min) / (x_max - x_min) * (width - left - right); }
  double y(double v) const { return top + (1 - v / y_max) * (height - top - bottom); }
};

void axes(std::ostringstream& os, const Plot& p, const std::string& y_title) {
  double y_step = nice_step(p.y_max, 5);
  for (double v = 0; v <= p.y_max * 1.0001; v += y_step) {
    os << "<line x1=\"" << px(p.left) << "\" x2=\"" << px(p.width - p.right) << "\" y1=\"" << px(p.y(v)) << "\" y2=\""
       << px(p.y(v)) << "\" class=\"grid\"/><text x=\"" << px(p.left - 6) << "\" y=\"" << px(p.y(v) + 4)
       << "\" text-anchor=\"end\">" << axis_number(v) << "</text>\n";
  }
  double x_step = std::max(1.0, nice_step(p.x_max - p.x_min, 10));
  for (double v = std::ceil(p.x_min / x_step) * x_step; v <= p.x_max + 1e-9; v += x_step)
    os << "<text x=\"" << px(p.x(v)) << "\" y=\"" << px(p.height - p.bottom + 16) << "\" text-anchor=\"middle\">"
       << axis_number(v) << "</text>\n";
  os << "<line x1=\"" << px(p.left) << "\" x2=\"" << px(p.width - p.right) << "\" y1=\"" << px(p.y(0)) << "\" y2=\""
     << px(p.y(0)) << "\" class=\"axis\"/><line x1=\"" << px(p.left) << "\" x2=\"" << px(p.left) << "\" y1=\""
     << px(p.top) << "\" y2=\"" << px(p.y(0)) << "\" class=\"axis\"/>\n"
     << "<text x=\"" << px((p.left + p.width - p.right) / 2) << "\" y=\"" << px(p.height - 6)
     << "\" text-anchor=\"middle\" class=\"axis-title\">iteration / step</text>\n"
     << "<text x=\"14\" y=\"" << px((p.top + p.height - p.bottom) / 2)
     << "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " << px((p.top + p.height - p.bottom) / 2)
     << ")\" class=\"axis-title\">" << html_escape(y_title) << "</text>\n";
}

double point_value(const StepPoint& p, bool tokens) {
  return tokens ? p.tokens_per_s : p.seconds;
}

}  // namespace

namespace {

// One series' chart: its own axes, as stages differ by orders of magnitude (an
// SFT step against a GRPO iteration) and share no step numbering.
std::string series_chart(const StepSeries& s, bool tokens, const std::string& colour) {
  Plot p;
  p.height = 230;
  p.x_min = INFINITY, p.x_max = -INFINITY, p.y_max = 0;
  for (const auto& pt : s.points) {
    double v = point_value(pt, tokens);
    if (!std::isfinite(v)) continue;
    p.x_min = std::min(p.x_min, static_cast<double>(pt.step));
    p.x_max = std::max(p.x_max, static_cast<double>(pt.step));
    p.y_max = std::max(p.y_max, v);
  }
  if (!std::isfinite(p.x_min)) return "";
  if (p.x_max == p.x_min) p.x_min -= 1, p.x_max += 1;
  p.y_max = p.y_max > 0 ? p.y_max * 1.1 : 1;
  p.top = 28;  // the series' name above the plot
  std::ostringstream os, points;
  os << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << p.width << "\" height=\"" << p.height
     << "\" viewBox=\"0 0 " << p.width << " " << p.height << "\">\n";
  axes(os, p, tokens ? "tokens/s" : "seconds");
  std::string label = s.stage + (s.stage_index >= 0 ? ", stage " + std::to_string(s.stage_index) : "");
  os << "<text x=\"" << px(p.left) << "\" y=\"16\" fill=\"" << colour << "\" class=\"series\">" << html_escape(label)
     << "</text><text x=\"" << px(p.width - p.right) << "\" y=\"16\" text-anchor=\"end\" class=\"axis-title\">from "
     << html_escape(tokens ? s.tokens_source : s.source) << "</text>\n";
  std::ostringstream dots;
  for (const auto& pt : s.points) {
    double v = point_value(pt, tokens);
    if (!std::isfinite(v)) continue;
    double x = p.x(static_cast<double>(pt.step)), y = p.y(v);
    points << px(x) << "," << px(y) << " ";
    dots << "<circle cx=\"" << px(x) << "\" cy=\"" << px(y) << "\" r=\"" << (s.points.size() > 200 ? 1.5 : 3)
         << "\" fill=\"" << colour << "\"><title>" << html_escape(label) << " step " << pt.step << ": "
         << (tokens ? format("%.0f tokens/s", v) : seconds_text(v)) << "</title></circle>\n";
  }
  os << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"" << points.str() << "\"/>\n"
     << dots.str() << "</svg>\n";
  return os.str();
}

}  // namespace

std::string step_chart_svg(const std::vector<StepSeries>& series, bool tokens, const std::string& id) {
  std::string charts;
  for (size_t i = 0; i < series.size(); ++i) charts += series_chart(series[i], tokens, kColours[i % kColourCount]);
  if (charts.empty())
    return "<p id=\"" + id + "\" class=\"absent\">" +
           (tokens ? "No step recorded its tokens (metrics.jsonl tokens_per_s, or a tokens arg on the step span)."
                   : "No iteration or step was recorded (metrics.jsonl seconds/iteration|step, or "
                     "&lt;stage&gt;/iteration|step spans).") +
           "</p>\n";
  return "<div id=\"" + id + "\" class=\"charts\">\n" + charts + "</div>\n";
}

}  // namespace hpcrl::trace::report
