// The training half of the report page (report_curves.h): per stage the
// learning curves (report_curves_svg.cpp), then the last evaluation's sample
// generations and the resolved config of every run. All text from the run
// directory (prompts, responses, the config) is escaped: a prompt holding
// "<script>" is shown as those characters.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

// "curve-s1-reward-mean" for reward/mean of stage 1: an id from letters, digits and '-'.
std::string curve_id(int stage, const std::string& metric) {
  std::string id = "curve-s" + std::to_string(stage) + "-";
  for (char c : metric) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return id;
}

std::string curves_html(const std::vector<RunResults>& runs) {
  std::vector<StageCurves> stages = learning_curves(runs);
  std::ostringstream os;
  os << "<h2>Learning curves</h2>\n";
  if (stages.empty()) {
    os << "<p id=\"learning-curves\" class=\"absent\">No learning-curve metric in metrics.jsonl (reward/mean, "
          "eval/accuracy, kl, entropy, response_len/mean, loss, grad_norm, ...).</p>\n";
    return os.str();
  }
  os << "<div id=\"learning-curves\">\n";
  if (runs.size() > 1) {
    os << "<p class=\"note\">" << runs.size() << " runs overlaid, one colour each: ";
    for (size_t r = 0; r < runs.size(); ++r)
      os << (r ? ", " : "") << "<span class=\"swatch\" style=\"background:" << series_colour(r) << "\"></span>"
         << html_escape(runs[r].label);
    os << ". Stage i of every run is drawn on one chart.</p>\n";
  }
  for (const auto& st : stages) {
    os << "<h3>Stage " << st.stage_index << ": " << html_escape(st.stage) << "</h3>\n<div class=\"curves\">\n";
    for (const auto& c : st.curves) os << learning_curve_svg(c, curve_id(st.stage_index, c.metric), runs.size() > 1);
    os << "</div>\n";
  }
  os << "<p class=\"note\">From metrics.jsonl, the step on x. Bands: ± the batch's reward/std. An evaluation "
        "(eval/...) is a point at the step it followed; a null (non-finite) value is left out.</p>\n</div>\n";
  return os.str();
}

std::string reward_text(double reward) {
  return std::isfinite(reward) ? format("%.4g", reward) : "–";
}

void samples_of(std::ostringstream& os, const RunResults& run) {
  if (!run.has_samples) {
    os << "<p class=\"absent\">No sample generations recorded (no eval_samples.jsonl in the run directory).</p>\n";
    return;
  }
  if (run.samples_skipped)
    os << "<p class=\"meta warn\">eval_samples.jsonl: " << run.samples_skipped
       << " lines that are not sample objects (with integer stage and step) were skipped</p>\n";
  if (run.samples.empty()) {
    os << "<p class=\"absent\">No sample generations recorded (eval_samples.jsonl holds no sample).</p>\n";
    return;
  }
  const EvalSample& first = run.samples.front();
  os << "<p class=\"note\">The last evaluation: stage " << first.stage << " (" << html_escape(first.kind)
     << "), step " << first.step << ", " << run.samples.size() << " samples.</p>\n"
     << "<table class=\"samples\">\n<tr><th>prompt</th><th>response</th><th>answer</th><th class=\"n\">reward</th>"
        "</tr>\n";
  for (const auto& s : run.samples)
    os << "<tr><td><pre>" << html_escape(s.prompt) << "</pre></td><td><pre>" << html_escape(s.response)
       << "</pre></td><td><pre>" << html_escape(s.answer) << "</pre></td><td class=\"n\">" << reward_text(s.reward)
       << "</td></tr>\n";
  os << "</table>\n";
}

std::string samples_html(const std::vector<RunResults>& runs) {
  std::ostringstream os;
  os << "<h2>Sample generations</h2>\n<div id=\"samples\">\n";
  for (const auto& run : runs) {
    if (runs.size() > 1) os << "<h3>" << html_escape(run.label) << "</h3>\n";
    samples_of(os, run);
  }
  os << "</div>\n";
  return os.str();
}

std::string config_html(const std::vector<RunResults>& runs) {
  std::ostringstream os;
  os << "<h2>Config</h2>\n<div id=\"config\">\n";
  for (const auto& run : runs) {
    std::string who = runs.size() > 1 ? html_escape(run.label) + ": " : "";
    if (!run.has_config) {
      os << "<p class=\"absent\">" << who << "no config.resolved.yaml in the run directory.</p>\n";
      continue;
    }
    size_t lines = static_cast<size_t>(std::count(run.config_yaml.begin(), run.config_yaml.end(), '\n'));
    os << "<details class=\"config\"><summary>" << who << "config.resolved.yaml (" << lines
       << " lines)</summary>\n<pre>" << html_escape(run.config_yaml) << "</pre></details>\n";
  }
  os << "</div>\n";
  return os.str();
}

}  // namespace

std::string training_sections_html(const ReportData& d) {
  return curves_html(d.runs) + samples_html(d.runs) + config_html(d.runs);
}

}  // namespace hpcrl::trace::report
