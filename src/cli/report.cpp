// `hpcrl report RUN_DIR [RUN_DIR ...] [--out FILE]`: one self-contained HTML
// page of what a run learned (learning curves per stage, the last evaluation's
// sample generations, the resolved config) and where its time went
// (observations, span shares, per-iteration time and tokens/s, one step on
// every rank, communication, imbalance, roles), from the rank traces,
// metrics.jsonl, eval_samples.jsonl and config.resolved.yaml, written
// atomically to RUN_DIR/report.html or FILE. Further run directories overlay
// their learning curves, samples and configs on the first run's page.
// The observations are printed too, so a terminal session sees the findings
// without opening the page. No trace files is an InputError (exit 2). The
// peak-memory table gets `hpcrl plan`'s per-rank estimate beside each rank.
#include "hpcrl/trace/report.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/memory_plan.h"
#include "hpcrl/cost/run_comparison.h"
#include "hpcrl/util/fs.h"

namespace {

struct ReportArgs {
  std::vector<std::string> run_dirs;  // the first is the run the systems sections are of
  std::string out;  // "" -> RUN_DIR/report.html
  std::string estimate;  // a hardware profile: the cost model beside each span
};

int report(const ReportArgs& args) {
  using namespace hpcrl::trace;
  ReportData data;
  Estimator estimate;
  if (!args.estimate.empty()) {
    const hpcrl::cost::HardwareProfile hw = hpcrl::cost::load_profile(args.estimate);
    estimate = [&, hw](const std::vector<TraceFile>& files) {
      return hpcrl::cost::compare_with_run(args.run_dirs.front(), files, hw);
    };
  }
  data = collect_runs_report(args.run_dirs, estimate);
  hpcrl::cli::add_plan_memory(data.memory, args.run_dirs.front());
  const std::string path =
      args.out.empty() ? (std::filesystem::path(args.run_dirs.front()) / "report.html").string() : args.out;
  hpcrl::fs::write_file_atomic(path, render_report_html(data));
  for (const auto& f : data.summary.files)
    if (f.skipped)
      spdlog::warn("{}: the last event was cut off mid-write (crashed run?); skipped {} event", f.path, f.skipped);
  spdlog::info("wrote {} ({} observations{})", path, data.observations.size(),
               data.runs.size() > 1 ? ", learning curves of " + std::to_string(data.runs.size()) + " runs" : "");
  for (const auto& o : data.observations) std::printf("- %s\n", o.text.c_str());
  return 0;
}

hpcrl::cli::Registration reg{
    "report", 42, [](CLI::App& app) {
      auto* cmd = app.add_subcommand(
          "report",
          "One self-contained HTML page of what a run learned and where its time went; writes RUN_DIR/report.html");
      auto args = std::make_shared<ReportArgs>();
      cmd->add_option("RUN_DIR", args->run_dirs,
                      "Run directory (holds trace/rank-NNNNN.json, metrics.jsonl); further ones overlay their "
                      "learning curves, samples and configs on the first's page")
          ->required();
      cmd->add_option("--out", args->out, "Write the page here instead of the first RUN_DIR's report.html");
      cmd->add_option("--estimate", args->estimate,
                      "Hardware profile (a shipped name or a file from `hpcrl calibrate`): the cost model's "
                      "prediction beside each span, MFU and decode bandwidth");
      return [args] { return report(*args); };
    }};

}  // namespace
