// `hpcrl trace summarize RUN_DIR [--json]`: merges every rank's trace of a run
// into one table (where the time went, per span and per collective, and how
// unevenly across ranks), writes RUN_DIR/trace/summary.md and summary.csv, and
// prints the table, or with --json exactly one JSON document on stdout (notes go
// to stderr). A crashed run's traces are read up to their last complete event.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "hpcrl/trace/summary.h"

namespace {

struct SummarizeArgs {
  std::string run_dir;
  bool json = false;
};

int summarize(const SummarizeArgs& args) {
  using namespace hpcrl::trace;
  Summary s = summarize_run(args.run_dir);
  for (const auto& f : s.files)
    if (f.skipped)
      spdlog::warn("{}: the last event was cut off mid-write (crashed run?); skipped {} event", f.path, f.skipped);
  std::string trace_dir = (std::filesystem::path(args.run_dir) / "trace").string();
  write_summary(s, trace_dir);
  spdlog::info("wrote {}/summary.md and {}/summary.csv", trace_dir, trace_dir);
  std::string out = args.json ? format_json(s) : format_markdown(s);
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
  return [args] { return summarize(*args); };
}};

}  // namespace
