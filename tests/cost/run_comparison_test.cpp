// The cost model beside a run (run_comparison.h) on the hand-made run of
// synthetic_run.h: medians per step from the traces, the prediction exactly the
// estimate's for the run's own lengths, MFU from its FLOPs, and the report page
// and observations that show them.
#include "hpcrl/cost/run_comparison.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "hpcrl/config/loader.h"
#include "hpcrl/cost/stage_estimate.h"
#include "hpcrl/trace/report.h"
#include "hpcrl/trace/summary.h"
#include "hpcrl/util/error.h"
#include "synthetic_run.h"
#include "test_profile.h"
#include "trace/report_parts.h"

namespace hpcrl::cost {
namespace {

namespace stdfs = std::filesystem;

using cost_test::test_cpu;

struct SyntheticRun {
  std::string dir;
  SyntheticRun() : dir((stdfs::temp_directory_path() / ("hpcrl_cmp_" + std::to_string(::getpid()))).string()) {
    stdfs::remove_all(dir);
    cost_test::write_synthetic_sft_run(dir);
  }
  ~SyntheticRun() { stdfs::remove_all(dir); }
};

const trace::SpanComparison* row(const trace::EstimateComparison& c, const std::string& span) {
  for (const auto& r : c.rows)
    if (r.span == span) return &r;
  return nullptr;
}

TEST(RunComparison, MeasuredIsTheMedianPerStepWithoutTheFirstAndPredictedIsTheEstimate) {
  SyntheticRun run;
  const HardwareProfile hw = test_cpu();
  const auto c = compare_with_run(run.dir, trace::read_run_traces(run.dir), hw);
  const auto* step = row(c, "sft/step");
  const auto* fb = row(c, "sft/forward_backward");
  const auto* opt = row(c, "sft/optimizer");
  ASSERT_TRUE(step && fb && opt);
  EXPECT_NEAR(step->measured_s, 1.0, 1e-9);
  EXPECT_EQ(step->samples, 3) << "4 steps, the first left out";
  EXPECT_NEAR(fb->measured_s, 0.8, 1e-9) << "median of 0.7, 0.8, 0.9; the evaluation's pass is outside every step";
  EXPECT_NEAR(opt->measured_s, 0.05, 1e-9);
  // The prediction is plan --estimate --from-run's: the same config, profile and measured lengths.
  config::ValidateOptions vo;
  vo.world = 1;
  const auto cfg = config::check_pipeline_config(run.dir + "/config.resolved.yaml", {}, vo).config;
  const auto est = estimate_pipeline(cfg, 1, hw, {}, measured_shapes(run.dir, cfg));
  EXPECT_EQ(est[0].row, 40) << "rows padded to the longest the run measured";
  EXPECT_DOUBLE_EQ(step->predicted_s, est[0].seconds);
  EXPECT_DOUBLE_EQ(fb->predicted_s, est[0].spans[0].cost.seconds());
  EXPECT_DOUBLE_EQ(fb->flops, est[0].spans[0].cost.flops);
  // MFU: the pass's FLOPs over its measured 0.8 s at the 30 GFLOP/s peak.
  EXPECT_DOUBLE_EQ(fb->mfu, fb->flops / (0.8 * 30e9));
  EXPECT_NEAR(fb->ratio(), fb->predicted_s / 0.8, 1e-12);
  EXPECT_TRUE(std::isnan(fb->bandwidth_utilisation));
}

TEST(RunComparison, JsonAndTextCarryTheSameNumbers) {
  SyntheticRun run;
  const auto c = compare_with_run(run.dir, trace::read_run_traces(run.dir), test_cpu());
  const auto j = nlohmann::json::parse(trace::comparison_json(c));
  EXPECT_EQ(j["profile"], "test-cpu");
  EXPECT_EQ(j["peak_flops"], 30e9);
  const auto* fb = row(c, "sft/forward_backward");
  bool found = false;
  for (const auto& r : j["rows"]) {
    if (r["span"] != "sft/forward_backward") continue;
    found = true;
    EXPECT_NEAR(r["measured_s"].get<double>(), 0.8, 1e-9);
    EXPECT_DOUBLE_EQ(r["predicted_s"].get<double>(), fb->predicted_s);
    EXPECT_DOUBLE_EQ(r["ratio"].get<double>(), fb->ratio());
    EXPECT_DOUBLE_EQ(r["mfu"].get<double>(), fb->mfu);
    EXPECT_TRUE(r["bandwidth_utilisation"].is_null());
    EXPECT_EQ(r["samples"], 3);
    EXPECT_EQ(r["predicted_from"], "train/forward_backward");
  }
  EXPECT_TRUE(found);
  const std::string md = trace::comparison_markdown(c);
  EXPECT_NE(md.find("| sft | sft/forward_backward | 0.8 |"), std::string::npos) << md;
}

TEST(RunComparison, ReportPageShowsTheTableAndObservesTheMfu) {
  SyntheticRun run;
  const HardwareProfile hw = test_cpu();
  trace::Estimator estimate = [&](const std::vector<trace::TraceFile>& files) {
    return compare_with_run(run.dir, files, hw);
  };
  const trace::ReportData d = trace::collect_run_report(run.dir, estimate);
  const std::string html = trace::render_report_html(d);
  EXPECT_NE(html.find("<table id=\"estimate-table\">"), std::string::npos);
  EXPECT_NE(html.find("<td>sft/forward_backward</td><td class=\"n\">0.800 s</td>"), std::string::npos);
  const auto* fb = row(d.estimate, "sft/forward_backward");
  ASSERT_TRUE(fb);
  bool mfu = false;
  for (const auto& o : d.observations)
    mfu = mfu || o.text.find("sft/forward_backward runs at " + trace::report::percent_text(fb->mfu) + " MFU") == 0;
  EXPECT_TRUE(mfu);
  // Without a profile the section says how to get it.
  const std::string plain = trace::render_report_html(trace::collect_run_report(run.dir));
  EXPECT_NE(plain.find("<p id=\"estimate-table\" class=\"absent\">"), std::string::npos);
}

TEST(RunComparison, ASpanFarOffItsPredictionIsObserved) {
  SyntheticRun run;
  HardwareProfile slow = test_cpu();
  slow.peak_flops = 1e6;  // the model now predicts far more than the 0.8 s the run took
  trace::Estimator estimate = [&](const std::vector<trace::TraceFile>& files) {
    return compare_with_run(run.dir, files, slow);
  };
  const trace::ReportData d = trace::collect_run_report(run.dir, estimate);
  bool off = false;
  for (const auto& o : d.observations)
    off = off || (o.span == "sft/forward_backward" && o.text.find("faster than modelled") != std::string::npos);
  EXPECT_TRUE(off);
}

TEST(RunComparison, ARunDirectoryWithoutItsConfigIsAnInputError) {
  SyntheticRun run;
  stdfs::remove(run.dir + "/config.resolved.yaml");
  EXPECT_THROW(compare_with_run(run.dir, trace::read_run_traces(run.dir), test_cpu()), InputError);
}

}  // namespace
}  // namespace hpcrl::cost
