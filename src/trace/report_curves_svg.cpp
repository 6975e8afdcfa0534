// One learning curve as an inline SVG chart: the step on x, the metric on y
// (its range from the data, spread band included, widened to whole ticks), one
// polyline per run in the run's colour, a translucent ± band where the metric
// has a spread (reward/std around reward/mean), and a dot per point whose
// <title> gives the run, the step and the exact value on hover.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

constexpr double kWidth = 490, kPlotHeight = 230;
constexpr double kCharWidth = 6.8;  // of 12 px sans-serif
constexpr double kLegendRow = 18;

// Pixel box and data ranges of one chart.
struct Frame {
  double left = 64, right = kWidth - 14, top = 30, bottom = kPlotHeight - 40;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1, y_step = 1, x_step = 1;
  double x(double v) const { return left + (v - x_min) / (x_max - x_min) * (right - left); }
  double y(double v) const { return bottom - (v - y_min) / (y_max - y_min) * (bottom - top); }
};

// The data's ranges, y widened to whole ticks of a 1-2-5 step.
Frame frame_of(const LearningCurve& c) {
  Frame f;
  double lo = INFINITY, hi = -INFINITY, first = INFINITY, last = -INFINITY;
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      double band = std::isfinite(p.spread) ? std::fabs(p.spread) : 0;
      lo = std::min(lo, p.value - band), hi = std::max(hi, p.value + band);
      first = std::min(first, static_cast<double>(p.step)), last = std::max(last, static_cast<double>(p.step));
    }
  if (hi == lo) {  // a flat curve: 0 to 1 for a zero (an accuracy or reward never won), else ± 10 %
    double pad = std::fabs(lo) * 0.1;
    lo == 0 ? hi = 1 : (lo -= pad, hi += pad);
  }
  f.y_step = nice_step(hi - lo, 4);
  f.y_min = std::floor(lo / f.y_step) * f.y_step, f.y_max = std::ceil(hi / f.y_step) * f.y_step;
  if (first == last) first -= 1, last += 1;
  f.x_min = first, f.x_max = last;
  f.x_step = std::max(1.0, nice_step(last - first, 6));
  return f;
}

// A tick value k·step, with the rounding noise of the product removed.
double tick(double k, double step) {
  double v = k * step;
  return std::fabs(v) < step * 1e-9 ? 0.0 : v;
}

// A tick value with the decimals its step needs, so neighbouring ticks never read alike (0.155 beside 0.16).
std::string tick_text(double v, double step) {
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return format(("%." + std::to_string(decimals) + "f").c_str(), v);
}

void curve_axes(std::ostringstream& os, const Frame& f, const std::string& y_title) {
  for (double k = std::round(f.y_min / f.y_step); tick(k, f.y_step) <= f.y_max + f.y_step * 1e-9; ++k) {
    double v = tick(k, f.y_step);
    os << "<line x1=\"" << px(f.left) << "\" x2=\"" << px(f.right) << "\" y1=\"" << px(f.y(v)) << "\" y2=\""
       << px(f.y(v)) << "\" class=\"grid\"/><text x=\"" << px(f.left - 5) << "\" y=\"" << px(f.y(v) + 4)
       << "\" text-anchor=\"end\">" << tick_text(v, f.y_step) << "</text>\n";
  }
  for (double k = std::ceil(f.x_min / f.x_step); tick(k, f.x_step) <= f.x_max + 1e-9; ++k)
    os << "<line x1=\"" << px(f.x(tick(k, f.x_step))) << "\" x2=\"" << px(f.x(tick(k, f.x_step))) << "\" y1=\""
       << px(f.bottom) << "\" y2=\"" << px(f.bottom + 4) << "\" class=\"axis\"/><text x=\""
       << px(f.x(tick(k, f.x_step))) << "\" y=\"" << px(f.bottom + 16) << "\" text-anchor=\"middle\">"
       << tick_text(tick(k, f.x_step), f.x_step) << "</text>\n";
  os << "<line x1=\"" << px(f.left) << "\" x2=\"" << px(f.right) << "\" y1=\"" << px(f.bottom) << "\" y2=\""
     << px(f.bottom) << "\" class=\"axis\"/><line x1=\"" << px(f.left) << "\" x2=\"" << px(f.left) << "\" y1=\""
     << px(f.top) << "\" y2=\"" << px(f.bottom) << "\" class=\"axis\"/>\n<text x=\"" << px((f.left + f.right) / 2)
     << "\" y=\"" << px(f.bottom + 32) << "\" text-anchor=\"middle\" class=\"axis-title\">step</text>\n<text x=\"12\" y=\""
     << px((f.top + f.bottom) / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 12 "
     << px((f.top + f.bottom) / 2) << ")\" class=\"axis-title\">" << html_escape(y_title) << "</text>\n";
}

// The ± band of the points that have a spread: along the upper edge, back along the lower.
std::string band_svg(const CurveSeries& s, const Frame& f, const std::string& colour) {
  std::string upper, lower;
  for (const auto& p : s.points)
    if (std::isfinite(p.spread)) upper += px(f.x(static_cast<double>(p.step))) + "," + px(f.y(p.value + p.spread)) + " ";
  for (auto it = s.points.rbegin(); it != s.points.rend(); ++it)
    if (std::isfinite(it->spread))
      lower += px(f.x(static_cast<double>(it->step))) + "," + px(f.y(it->value - it->spread)) + " ";
  if (upper.empty()) return "";
  return "<polygon class=\"band\" fill=\"" + colour + "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"" + upper +
         lower + "\"/>\n";
}

std::string series_svg(const CurveSeries& s, const LearningCurve& c, const Frame& f) {
  const std::string colour = series_colour(s.run);
  std::ostringstream line, dots;
  double r = s.points.size() > 100 ? 1.2 : 2.5;
  for (const auto& p : s.points) {
    double x = f.x(static_cast<double>(p.step)), y = f.y(p.value);
    line << px(x) << "," << px(y) << " ";
    dots << "<circle cx=\"" << px(x) << "\" cy=\"" << px(y) << "\" r=\"" << r << "\" fill=\"" << colour
         << "\"><title>" << html_escape(s.label) << " step " << p.step << ": " << html_escape(c.metric) << " "
         << format("%.6g", p.value)
         << (std::isfinite(p.spread) ? " ± " + format("%.6g", p.spread) + " (" + html_escape(c.spread) + ")" : "")
         << "</title></circle>\n";
  }
  return band_svg(s, f, colour) + "<polyline class=\"curve\" data-run=\"" + html_escape(s.label) +
         "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\" points=\"" + line.str() + "\"/>\n" +
         dots.str();
}

// The runs' swatches and names from y, wrapped at the chart's width; `height` is set to the rows' height.
std::string curve_legend(const LearningCurve& c, double y, double& height) {
  std::ostringstream os;
  double x = 8, row = y;
  for (const auto& s : c.series) {
    double w = 18 + kCharWidth * static_cast<double>(s.label.size()) + 14;
    if (x > 8 && x + w > kWidth - 8) x = 8, row += kLegendRow;
    os << "<rect x=\"" << px(x) << "\" y=\"" << px(row) << "\" width=\"12\" height=\"12\" fill=\""
       << series_colour(s.run) << "\"/><text x=\"" << px(x + 17) << "\" y=\"" << px(row + 10.5)
       << "\" class=\"legend\">" << html_escape(s.label) << "</text>\n";
    x += w;
  }
  height = c.series.empty() ? 0 : row - y + kLegendRow;
  return os.str();
}

}  // namespace

std::string learning_curve_svg(const LearningCurve& c, const std::string& id, bool legend) {
  Frame f = frame_of(c);
  double legend_h = 0;
  std::string legend_text = legend ? curve_legend(c, kPlotHeight, legend_h) : "";
  double height = kPlotHeight + legend_h;
  std::ostringstream os;
  os << "<svg id=\"" << html_escape(id) << "\" class=\"chart curve-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << kWidth << "\" height=\"" << px(height) << "\" viewBox=\"0 0 " << kWidth << " " << px(height) << "\">\n"
     << "<text x=\"" << px(f.left) << "\" y=\"16\" class=\"series\">" << html_escape(c.title) << "</text>\n";
  curve_axes(os, f, c.metric);
  for (const auto& s : c.series) os << series_svg(s, c, f);
  os << legend_text << "</svg>\n";
  return os.str();
}

}  // namespace hpcrl::trace::report
