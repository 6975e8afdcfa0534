// Internal to the report (report.h): the pieces collect_report() assembles,
// each in its own file, and the text helpers the observations and the HTML
// share so a number reads the same in a sentence and in a table.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "hpcrl/trace/report.h"

namespace hpcrl::trace::report {

// report_steps.cpp: per-iteration/step time and tokens/s, from metrics.jsonl
// lines (counted into `lines` / `skipped`), else from the step spans.
std::vector<StepSeries> step_series(const std::vector<TraceFile>& files, const Summary& summary,
                                    const std::string& metrics_jsonl, int64_t& lines, int64_t& skipped);

// report_timeline.cpp: the representative step on every rank's lanes.
Timeline representative_timeline(const std::vector<TraceFile>& files, const Summary& summary);

// "grpo/iteration" or "grpo/step" of a top-level span "grpo": the span one
// iteration or optimizer step is recorded as ("" when the name is neither).
inline std::string step_stage(const std::string& span) {
  for (const char* suffix : {"/iteration", "/step"}) {
    std::string s(suffix);
    if (span.size() > s.size() && span.compare(span.size() - s.size(), s.size(), s) == 0) {
      std::string stage = span.substr(0, span.size() - s.size());
      if (stage.find('/') == std::string::npos) return stage;
    }
  }
  return "";
}

// Colours by span or collective name, the same in every chart and legend:
// the run's span names in tree order take the palette first, then collectives.
class Palette {
 public:
  explicit Palette(const ReportData& d);
  std::string colour(const std::string& name) const;

 private:
  std::vector<std::string> names_;
};

// report_charts.cpp: the SVG charts, each an element with the given id.
std::string stage_shares_svg(const ReportData& d, const Palette& palette);
// Per-iteration seconds (tokens = false) or tokens/s (tokens = true) of every series.
std::string step_chart_svg(const std::vector<StepSeries>& series, bool tokens, const std::string& id);
// report_timeline_svg.cpp: the Gantt chart of the representative step.
std::string timeline_svg(const Timeline& t, const Palette& palette);
// Swatches and names from (x, y) wrapped at `width`; `height` is set to the rows' height.
std::string legend_svg(const std::vector<std::string>& names, const Palette& palette, double x, double y, double width,
                       double& height);

// The i-th colour of the palette (cycling): a run's colour in the learning curves.
std::string series_colour(size_t i);

// report_curves_svg.cpp: one learning curve's chart (an <svg> with the given id),
// a series per run in its series_colour; with `legend`, the runs' names under it.
std::string learning_curve_svg(const LearningCurve& curve, const std::string& id, bool legend);
// report_training_html.cpp: the training half of the page (learning curves,
// sample generations, config), every run of `d.runs`.
std::string training_sections_html(const ReportData& d);

// Axis steps of 1, 2 or 5 times a power of ten: about `ticks` of them up to `max`.
inline double nice_step(double max, int ticks) {
  double raw = max / ticks;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// report_estimate.cpp: the findings of a run beside the cost model (--estimate), and its section of the page.
void estimate_observations(const ReportData& d, std::vector<Observation>& out);
std::string estimate_section_html(const ReportData& d);

// Text colour readable on `fill` ("#rrggbb"; anything else counts as light):
// white on dark fills, near-black on light ones (relative luminance).
inline std::string ink_for(const std::string& fill) {
  if (fill.size() != 7 || fill[0] != '#') return "#1a1a1a";
  double channel[3];
  for (int i = 0; i < 3; ++i) channel[i] = std::stoi(fill.substr(1 + 2 * i, 2), nullptr, 16) / 255.0;
  double luminance = 0.2126 * channel[0] + 0.7152 * channel[1] + 0.0722 * channel[2];
  return luminance < 0.4 ? "#ffffff" : "#1a1a1a";
}

// A span named "<stage>/iteration" or "<stage>/step" whose stage was recorded
// as a top-level span: one iteration or optimizer step of that stage (pp/step
// is not: "pp" is no stage).
inline bool is_step_span(const Summary& s, const std::string& span) {
  std::string stage = step_stage(span);
  if (stage.empty()) return false;
  for (const auto& st : s.spans)
    if (st.name == stage) return true;
  return false;
}

inline std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// An SVG coordinate: a tenth of a pixel is finer than any screen.
inline std::string px(double v) {
  return format("%.1f", v);
}

// Seconds with the digits a reader needs at each magnitude ("0.227 s", "12.4 s", "3.10 ms", "4.2 µs").
inline std::string seconds_text(double s) {
  if (s >= 100) return format("%.0f s", s);
  if (s >= 10) return format("%.1f s", s);
  if (s >= 1) return format("%.2f s", s);
  if (s >= 0.01) return format("%.3f s", s);
  if (s >= 1e-5) return format("%.2f ms", s * 1e3);
  return format("%.1f µs", s * 1e6);
}

// A transfer rate in the unit that keeps it readable ("12.3 GB/s", "40.1 kB/s").
inline std::string rate_text(double gbytes_per_s) {
  if (gbytes_per_s >= 1) return format("%.1f GB/s", gbytes_per_s);
  if (gbytes_per_s >= 1e-3) return format("%.1f MB/s", gbytes_per_s * 1e3);
  return format("%.1f kB/s", gbytes_per_s * 1e6);
}

// A fraction as a whole percent ("71 %"), or with one decimal below 10 % ("2.4 %").
inline std::string percent_text(double fraction) {
  double p = 100 * fraction;
  return format(p < 10 ? "%.1f %%" : "%.0f %%", p);
}

// Text safe inside HTML elements and attribute values.
inline std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace hpcrl::trace::report
