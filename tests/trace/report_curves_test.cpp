// The training half of `hpcrl report` (report_curves.h): every plotted point of
// a learning curve is the metrics.jsonl value at its step, in step order (read
// from the data and read back from the page's SVG); each stage kind gets the
// curves it wrote; runs overlay as one named series each; the config and the
// last evaluation's samples are shown escaped. Metrics files and eval_samples.jsonl
// are written here by hand, so every expected value is in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "hpcrl/trace/report.h"
#include "hpcrl/util/error.h"
#include "html_check.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

// A GRPO stage (index 1) whose lines are out of step order, with an evaluation
// line, a null entropy at step 2, and a line cut off by a crash.
const char* const kGrpoMetrics =
    R"({"stage":"grpo","stage_index":1,"step":2,"time":2,"reward/mean":0.5,"reward/std":0.25,"kl":0.002,"entropy":null,"seconds/iteration":1.0})"
    "\n"
    R"({"stage":"grpo","stage_index":1,"step":1,"time":1,"reward/mean":0.25,"reward/std":0.125,"kl":0.001,"entropy":1.5,"seconds/iteration":1.0})"
    "\n"
    R"({"stage":"grpo","stage_index":1,"step":2,"time":3,"eval/accuracy":0.375,"seconds/eval":2.0})"
    "\n"
    R"({"stage":"grpo","stage_index":1,"step":3,"time":4,"reward/mean":0.75,"reward/std":0.5,"kl":0.004,"entropy":1.25,"seconds/iteration":1.0})"
    "\n"
    R"({"stage":"grpo","stage_index":1,"st)";

const trace::LearningCurve* curve_of(const std::vector<trace::StageCurves>& stages, int stage, const std::string& m) {
  for (const auto& st : stages)
    if (st.stage_index == stage)
      for (const auto& c : st.curves)
        if (c.metric == m) return &c;
  return nullptr;
}

std::vector<int64_t> steps_of(const trace::CurveSeries& s) {
  std::vector<int64_t> out;
  for (const auto& p : s.points) out.push_back(p.step);
  return out;
}

std::vector<double> values_of(const trace::CurveSeries& s) {
  std::vector<double> out;
  for (const auto& p : s.points) out.push_back(p.value);
  return out;
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

trace::RunResults run_of(const std::string& label, const std::string& metrics) {
  trace::RunResults r;
  r.label = label;
  r.metrics = trace::parse_metrics_lines(metrics);
  return r;
}

// The text between `<svg id="ID"` and its `</svg>`.
std::string svg_with_id(const std::string& html, const std::string& id) {
  size_t at = html.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) - at);
}

// A run directory with one rank's trace, its metrics.jsonl and, when given, the other two files.
stdfs::path make_run(const stdfs::path& dir, const std::string& metrics, const std::string& config = "",
                     const std::string& samples = "") {
  stdfs::create_directories(dir / "trace");
  write_text((dir / "trace" / "rank-00000.json").string(),
             "[\n{\"name\":\"grpo\",\"cat\":\"span\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1000}\n]\n");
  write_text((dir / "metrics.jsonl").string(), metrics);
  if (!config.empty()) write_text((dir / "config.resolved.yaml").string(), config);
  if (!samples.empty()) write_text((dir / "eval_samples.jsonl").string(), samples);
  return dir;
}

}  // namespace

TEST(ReportCurves, PointsAreTheFileValuesInStepOrder) {
  auto stages = trace::learning_curves({run_of("a", kGrpoMetrics)});
  const auto* reward = curve_of(stages, 1, "reward/mean");
  ASSERT_NE(reward, nullptr);
  ASSERT_EQ(reward->series.size(), 1u);
  EXPECT_EQ(steps_of(reward->series[0]), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(values_of(reward->series[0]), (std::vector<double>{0.25, 0.5, 0.75}));
  std::vector<double> spreads;
  for (const auto& p : reward->series[0].points) spreads.push_back(p.spread);
  EXPECT_EQ(spreads, (std::vector<double>{0.125, 0.25, 0.5})) << "the band is reward/std of the same line";
  const auto* kl = curve_of(stages, 1, "kl");
  ASSERT_NE(kl, nullptr);
  EXPECT_EQ(values_of(kl->series[0]), (std::vector<double>{0.001, 0.002, 0.004}));
  EXPECT_TRUE(std::isnan(kl->series[0].points[0].spread)) << "kl has no spread metric";
}

TEST(ReportCurves, EvaluationLinesMakeTheHeldOutCurve) {
  auto stages = trace::learning_curves({run_of("a", kGrpoMetrics)});
  const auto* acc = curve_of(stages, 1, "eval/accuracy");
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(steps_of(acc->series[0]), (std::vector<int64_t>{2}));
  EXPECT_EQ(values_of(acc->series[0]), (std::vector<double>{0.375}));
}

TEST(ReportCurves, NullValueIsAGap) {
  // entropy: 1.5 at step 1, null at step 2, 1.25 at step 3.
  auto stages = trace::learning_curves({run_of("a", kGrpoMetrics)});
  const auto* entropy = curve_of(stages, 1, "entropy");
  ASSERT_NE(entropy, nullptr);
  EXPECT_EQ(steps_of(entropy->series[0]), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values_of(entropy->series[0]), (std::vector<double>{1.5, 1.25}));
}

TEST(ReportCurves, EachStageKindGetsTheCurvesItWrote) {
  std::string metrics =
      R"({"stage":"sft","stage_index":0,"step":1,"loss":2.0,"lr":0.001,"grad_norm":3.0,"tokens_per_s":10,"seconds/step":1})"
      "\n"
      R"({"stage":"sft","stage_index":0,"step":1,"eval/accuracy":0.1,"eval/loss":2.5,"eval/response_len":20,"seconds/eval":1})"
      "\n"
      R"({"stage":"grpo","stage_index":1,"step":1,"loss":0.1,"grad_norm":0.5,"reward/mean":0.2,"reward/std":0.1,"accuracy":0.2,"kl":0.001,"entropy":1.1,"response_len/mean":12,"seconds/iteration":2})"
      "\n"
      R"({"stage":"distill","stage_index":2,"step":1,"loss":0.7,"grad_norm":1.2,"seconds/step":1})";
  auto stages = trace::learning_curves({run_of("a", metrics)});
  std::map<int, std::vector<std::string>> metrics_of;
  std::map<int, std::string> names;
  for (const auto& st : stages) {
    names[st.stage_index] = st.stage;
    for (const auto& c : st.curves) metrics_of[st.stage_index].push_back(c.metric);
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "sft"}, {1, "grpo"}, {2, "distill"}}));
  // In kCurveMetrics order; lr, tokens_per_s and seconds/... are not learning curves.
  EXPECT_EQ(metrics_of[0], (std::vector<std::string>{"eval/accuracy", "eval/response_len", "loss", "eval/loss",
                                                     "grad_norm"}));
  EXPECT_EQ(metrics_of[1], (std::vector<std::string>{"reward/mean", "accuracy", "kl", "entropy", "response_len/mean",
                                                     "loss", "grad_norm"}));
  EXPECT_EQ(metrics_of[2], (std::vector<std::string>{"loss", "grad_norm"}));
}

TEST(ReportCurves, PlottedPointsReadBackToTheFileValues) {
  auto d = trace::collect_report({}, kGrpoMetrics, "");
  std::string svg = svg_with_id(trace::render_report_html(d), "curve-s1-reward-mean");
  ASSERT_FALSE(svg.empty());
  // Each dot's tooltip: "<run> step <s>: reward/mean <value> ± <spread> (reward/std)", in drawing order.
  std::regex dot(R"re(<circle cx="([0-9.]+)"[^>]*><title>run step (-?[0-9]+): reward/mean ([-0-9.e+]+) ± ([-0-9.e+]+))re");
  std::vector<int64_t> steps;
  std::vector<double> values, spreads, xs;
  for (std::sregex_iterator it(svg.begin(), svg.end(), dot), end; it != end; ++it) {
    xs.push_back(std::stod((*it)[1]));
    steps.push_back(std::stoll((*it)[2]));
    values.push_back(std::stod((*it)[3]));
    spreads.push_back(std::stod((*it)[4]));
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(values, (std::vector<double>{0.25, 0.5, 0.75}));
  EXPECT_EQ(spreads, (std::vector<double>{0.125, 0.25, 0.5}));
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_LT(xs[0], xs[1]);
  EXPECT_LT(xs[1], xs[2]);
  // The line through them: one polyline with three vertices at the dots.
  std::smatch line;
  ASSERT_TRUE(std::regex_search(svg, line, std::regex(R"re(<polyline class="curve"[^>]* points="([^"]*)")re")));
  std::istringstream vertices(line[1].str());
  std::vector<double> line_xs;
  for (std::string v; vertices >> v;) line_xs.push_back(std::stod(v.substr(0, v.find(','))));
  EXPECT_EQ(line_xs, xs);
}

TEST(ReportCurves, TwoRunOverlayHasTwoNamedSeries) {
  TempDir tmp("curves_overlay");
  std::string b_metrics = R"({"stage":"grpo","stage_index":1,"step":1,"reward/mean":0.125,"reward/std":0.0})";
  auto a = make_run(tmp.path / "seed1", kGrpoMetrics), b = make_run(tmp.path / "seed2", b_metrics);
  trace::ReportData d;
  std::string out = (tmp.path / "both.html").string();
  EXPECT_EQ(trace::write_runs_report({a.string(), b.string()}, out, &d), out);
  auto stages = trace::learning_curves(d.runs);
  const auto* reward = curve_of(stages, 1, "reward/mean");
  ASSERT_NE(reward, nullptr);
  ASSERT_EQ(reward->series.size(), 2u);
  EXPECT_EQ(reward->series[0].label, "seed1");
  EXPECT_EQ(reward->series[1].label, "seed2");
  EXPECT_EQ(values_of(reward->series[1]), (std::vector<double>{0.125}));
  std::string svg = svg_with_id(read_text(out), "curve-s1-reward-mean");
  EXPECT_EQ(occurrences(svg, "<polyline class=\"curve\""), 2u);
  EXPECT_NE(svg.find("data-run=\"seed1\""), std::string::npos);
  EXPECT_NE(svg.find("data-run=\"seed2\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"legend\">seed2</text>"), std::string::npos) << "the legend names the run";
  const auto* kl = curve_of(stages, 1, "kl");
  ASSERT_NE(kl, nullptr);
  EXPECT_EQ(kl->series.size(), 1u) << "seed2 wrote no kl: no empty series for it";
}

TEST(ReportCurves, OverlayRunsOfTheSameNameAreNamedByPath) {
  TempDir tmp("curves_same_name");
  auto a = make_run(tmp.path / "x" / "run", kGrpoMetrics), b = make_run(tmp.path / "y" / "run", kGrpoMetrics);
  auto d = trace::collect_runs_report({a.string(), b.string()});
  ASSERT_EQ(d.runs.size(), 2u);
  EXPECT_EQ(d.runs[0].label, a.string());
  EXPECT_EQ(d.runs[1].label, b.string());
}

TEST(ReportCurves, OverlayRunWithoutMetricsIsAnInputError) {
  TempDir tmp("curves_no_metrics");
  auto a = make_run(tmp.path / "a", kGrpoMetrics);
  stdfs::create_directories(tmp.path / "b");
  EXPECT_THROW(trace::collect_runs_report({a.string(), (tmp.path / "b").string()}), InputError);
  EXPECT_THROW(trace::collect_runs_report({a.string(), (tmp.path / "missing").string()}), InputError);
}

TEST(ReportCurves, ConfigIsEscapedInACollapsibleBlock) {
  TempDir tmp("curves_config");
  auto a = make_run(tmp.path / "a", kGrpoMetrics, "run:\n  name: <script>alert(1)</script>\n  seed: 1\n");
  std::string html = read_text(trace::write_report(a.string(), ""));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  size_t details = html.find("<details class=\"config\"><summary>config.resolved.yaml (3 lines)</summary>");
  ASSERT_NE(details, std::string::npos);
  EXPECT_NE(html.find("  name: &lt;script&gt;alert(1)&lt;/script&gt;\n  seed: 1\n</pre></details>", details),
            std::string::npos);
  EXPECT_EQ(html_problem(html), "");
}

TEST(ReportCurves, SamplesAreTheLastEvaluationsEscaped) {
  // Evaluations (stage, step): (0, 10), (1, 20) twice, (1, 5) written last: the last evaluation is (1, 20).
  std::string samples =
      R"({"stage":0,"kind":"sft","step":10,"prompt":"p0","response":"r0","answer":"a0","reward":0.0})"
      "\n"
      R"({"stage":1,"kind":"grpo","step":20,"prompt":"<script>alert('x')</script> 2+3?","response":"5 & done","answer":"5","reward":1.0})"
      "\n"
      R"({"stage":1,"kind":"grpo","step":20,"prompt":"7+1?","response":"9","answer":"8","reward":0.0})"
      "\n"
      R"({"stage":1,"kind":"grpo","step":5,"prompt":"p5","response":"r5","answer":"a5","reward":null})"
      "\n";
  TempDir tmp("curves_samples");
  auto a = make_run(tmp.path / "a", kGrpoMetrics, "", samples);
  trace::ReportData d;
  std::string html = read_text(trace::write_report(a.string(), "", &d));
  ASSERT_EQ(d.runs[0].samples.size(), 2u);
  EXPECT_EQ(d.runs[0].samples[1].prompt, "7+1?");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<pre>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; 2+3?</pre></td><td><pre>5 &amp; done</pre>"),
            std::string::npos);
  EXPECT_NE(html.find("stage 1 (grpo), step 20, 2 samples"), std::string::npos);
  EXPECT_EQ(html.find("<pre>p5</pre>"), std::string::npos) << "an earlier evaluation is not shown";
  EXPECT_EQ(html_problem(html), "");
}

TEST(ReportCurves, MalformedSampleLinesAreCounted) {
  // One object without an integer step, one cut off: 2 skipped; the good line is the last evaluation.
  int64_t skipped = 0;
  auto s = trace::last_evaluation_samples(
      R"({"stage":0,"step":"x","prompt":"bad"})"
      "\n"
      R"({"stage":0,"kind":"sft","step":3,"prompt":"good","reward":1})"
      "\n"
      R"({"stage":0,"st)",
      skipped);
  EXPECT_EQ(skipped, 2);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].prompt, "good");
  EXPECT_EQ(s[0].reward, 1.0);
}

TEST(ReportCurves, NoSamplesFileSaysSo) {
  TempDir tmp("curves_no_samples");
  auto a = make_run(tmp.path / "a", kGrpoMetrics);
  std::string html = read_text(trace::write_report(a.string(), ""));
  EXPECT_NE(html.find("No sample generations recorded (no eval_samples.jsonl in the run directory)"),
            std::string::npos);
  EXPECT_NE(html.find("no config.resolved.yaml in the run directory"), std::string::npos);
}

TEST(ReportCurves, RunWithoutCurveMetricsSaysSo) {
  auto d = trace::collect_report({}, R"({"stage":"sft","stage_index":0,"step":1,"seconds/step":1})", "");
  std::string html = trace::render_report_html(d);
  EXPECT_NE(html.find("<p id=\"learning-curves\" class=\"absent\">"), std::string::npos);
}
