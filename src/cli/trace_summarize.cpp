// `hpcrl trace summarize RUN_DIR [--json] [--estimate PROFILE]`: merges every
// rank's trace of a run into one table (where the time went, per span and per
// collective, and how unevenly across ranks), writes RUN_DIR/trace/summary.md and
// summary.csv, and prints the table, or with --json exactly one JSON document on
// stdout (notes go to stderr). With a hardware profile, the cost model's
// prediction beside each span (the table of `hpcrl report --estimate`): a section
// after the table, or the document's "estimate" member. A crashed run's traces
// are read up to their last complete event. When metrics.jsonl holds peak memory
// (trace/memory_peaks.h), a section with each rank's peaks per stage beside
// `hpcrl plan`'s per-rank estimate follows, or the document's "memory" member.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/memory_plan.h"
#include "hpcrl/cost/run_comparison.h"
#include "hpcrl/trace/estimate_comparison.h"
#include "hpcrl/trace/memory_peaks.h"
#include "hpcrl/trace/summary.h"
#include "hpcrl/util/fs.h"

namespace {

struct SummarizeArgs {
  std::string run_dir;
  bool json = false;
  std::string estimate;  // a hardware profile
};

// RUN_DIR/metrics.jsonl's peak memory with the plan beside it (empty without the file).
hpcrl::trace::MemoryPeaks run_memory_peaks(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  auto peaks = hpcrl::trace::memory_peaks_from_metrics(
      hpcrl::trace::parse_metrics_lines(hpcrl::fs::read_file(path, "metrics file")));
  hpcrl::cli::add_plan_memory(peaks, run_dir);
  return peaks;
}

int summarize(const SummarizeArgs& args) {
  using namespace hpcrl::trace;
  const std::vector<TraceFile> files = read_run_traces(args.run_dir);
  Summary s = hpcrl::trace::summarize(files);  // qualified: this function is `summarize` too
  s.run_dir = args.run_dir;
  EstimateComparison comparison;
  if (!args.estimate.empty())
    comparison = hpcrl::cost::compare_with_run(args.run_dir, files, hpcrl::cost::load_profile(args.estimate));
  for (const auto& f : s.files)
    if (f.skipped)
      spdlog::warn("{}: the last event was cut off mid-write (crashed run?); skipped {} event", f.path, f.skipped);
  std::string trace_dir = (std::filesystem::path(args.run_dir) / "trace").string();
  write_summary(s, trace_dir);
  spdlog::info("wrote {}/summary.md and {}/summary.csv", trace_dir, trace_dir);
  const MemoryPeaks memory = run_memory_peaks(args.run_dir);
  std::string out;
  if (args.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(format_json(s));
    if (!args.estimate.empty()) j["estimate"] = nlohmann::ordered_json::parse(comparison_json(comparison));
    if (!memory.empty()) j["memory"] = nlohmann::ordered_json::parse(memory_peaks_json(memory));
    out = j.dump(2) + "\n";
  } else {
    out = format_markdown(s) + (args.estimate.empty() ? "" : comparison_markdown(comparison)) +
          (memory.empty() ? "" : memory_peaks_markdown(memory));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

hpcrl::cli::Registration reg{"trace", 40, [](CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Inspect the timing traces a run recorded");
  trace->require_subcommand(1);
  auto* sum = trace->add_subcommand(
      "summarize", "Per-span and per-collective time across ranks; writes RUN_DIR/trace/summary.md|csv");
  auto args = std::make_shared<SummarizeArgs>();
  sum->add_option("RUN_DIR", args->run_dir, "Run directory (holds trace/rank-NNNNN.json)")->required();
  sum->add_flag("--json", args->json, "Print one JSON document on stdout instead of the table")
      ->capture_default_str();
  sum->add_option("--estimate", args->estimate,
                  "Hardware profile (a shipped name or a file): the cost model's prediction beside each span");
  return [args] { return summarize(*args); };
}};

}  // namespace
