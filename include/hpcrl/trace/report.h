// `hpcrl report RUN_DIR`: one self-contained HTML page (inline SVG and CSS, no
// script, no network) that shows what a run learned and where its time went.
// The training half (report_curves.h): per stage, the learning curves from
// metrics.jsonl, the last evaluation's sample generations, the resolved config.
// The systems half, built from its rank traces (through summarize(), summary.h)
// and metrics.jsonl:
//   - observations first: sentences with their numbers and the span they come
//     from, ranked by the seconds they concern, each only when its measured
//     basis exists (the thresholds below);
//   - per stage, the shares of the spans that ran inside each span (ShareBar);
//   - per iteration/step: time and tokens/s (StepSeries);
//   - one representative step on every rank's lanes (Timeline);
//   - tables: communication by collective, rank imbalance per span, roles of a
//     disaggregated stage, the pipeline bubble;
//   - with a hardware profile (--estimate), the cost model's prediction beside
//     each span, MFU of training spans and decode's share of the memory bandwidth;
//   - each rank's peak memory per stage from metrics.jsonl (memory_peaks.h).
// collect_report() gathers the numbers, observe() words them, render_report_html()
// draws the page; write_report() does all three for a run directory.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hpcrl/trace/estimate_comparison.h"
#include "hpcrl/trace/memory_peaks.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/report_curves.h"
#include "hpcrl/trace/summary.h"

namespace hpcrl::trace {

// Observation thresholds (report_observations.cpp; docs/tracing.md lists them).
// A finding below its threshold is ordinary run-to-run noise on a small run and
// would bury the ones worth acting on.
inline constexpr double kPhaseShareMin = 0.25;       // a phase ≥ 25 % of its stage's iteration/step span
inline constexpr double kRankExcessMin = 0.15;       // a rank's span total ≥ 15 % above the mean of the ranks
inline constexpr double kBubbleExcessMin = 0.05;     // measured pipeline bubble ≥ theory + 5 points
inline constexpr double kRoleWaitMin = 0.15;         // a role waits ≥ 15 % of its <stage>/rounds time
inline constexpr double kCollectiveShareMin = 0.10;  // a collective ≥ 10 % of the span it runs inside
inline constexpr double kEstimateOffMin = 0.25;      // with --estimate: a span ≥ 25 % off the cost model's prediction
inline constexpr double kMinWallShare = 0.01;        // every finding concerns ≥ 1 % of the traced time
inline constexpr size_t kMaxObservations = 12;       // the page lists at most this many (largest first)

struct Observation {
  std::string text;    // one sentence with its numbers
  std::string span;    // the span (or collective's enclosing span) it comes from
  double seconds = 0;  // the seconds it concerns: the ranking key
};

// One bar of the stage-shares chart: a span and the spans that ran directly
// inside it in time (on the same rank and lane), which is not always what the
// names say: grpo/rollout runs inside grpo/iteration, rollout/decode inside
// grpo/rollout.
struct ShareBar {
  std::string span;
  int depth = 0;                                      // 0 for a top-level span (a stage), 1 for a span inside it, ...
  double total_s = 0;                                 // of `span`, over all ranks
  std::vector<std::pair<std::string, double>> parts;  // child span -> its seconds inside `span`, over all ranks
};

struct StepPoint {
  int64_t step = 0;
  double seconds = 0;
  double tokens_per_s = std::nan("");  // NaN when neither the metrics nor the span recorded tokens
};

// One stage's iterations (GRPO/PPO) or optimizer steps (SFT, distillation).
struct StepSeries {
  std::string stage;
  int stage_index = -1;       // -1 when read from spans (they do not carry it)
  std::string source;         // "metrics.jsonl seconds/iteration" or "span grpo/iteration (slowest rank)"
  std::string tokens_source;  // "metrics.jsonl tokens_per_s", "metrics.jsonl tokens / seconds/iteration", ...
  std::vector<StepPoint> points;
};

struct TimelineEvent {
  std::string name;
  bool comm = false;
  std::string group;  // comm events
  double bytes = 0;   // comm events
  int64_t rank = 0, lane = 0;
  int depth = 0;                  // nesting level on its lane within the window
  double start_s = 0, dur_s = 0;  // relative to the window start, clipped to the window
};

struct TimelineLane {
  int64_t rank = 0, lane = 0;
  int depths = 1;  // rows the lane needs for its nesting
};

// The representative step: the median-duration iteration/step span of the
// longest stage (or, without step spans, of the longest top-level span), and
// every rank's events inside its interval (ranks' clocks are Unix time).
struct Timeline {
  std::string span;            // "" when the run recorded no spans
  int64_t rank = 0;            // the rank whose event was chosen
  double step = std::nan("");  // its "step" arg
  int64_t candidates = 0;      // events of `span` it was the median of
  double window_s = 0;
  std::vector<TimelineLane> lanes;    // by rank, then lane
  std::vector<TimelineEvent> events;  // by lane, then start
  int64_t dropped = 0;                // shortest events left out to keep the page small
};

// A span's total per rank (only the ranks that recorded it), for imbalance.
struct RankTotals {
  std::string span;
  std::vector<std::pair<int64_t, double>> seconds;  // by rank
};

// Where a collective (op, group as in Summary.comm) spent most of its time: the
// innermost span it ran inside on the same rank. Its time there is the time it
// was in flight (the union of its calls' intervals on each rank), as
// asynchronous calls (pipeline send/recv) overlap each other and the compute;
// their summed durations would exceed the span.
struct CommPlacement {
  std::string op, group;
  std::string parent;        // "" when it ran outside every span
  double seconds = 0;        // in flight inside `parent`, summed over ranks
  double parent_s = 0;       // total of `parent` over all ranks
  bool overlapping = false;  // some of its calls overlapped each other on a rank: asynchronous
};

struct ReportData {
  std::string run_name;  // run.name of config.resolved.yaml, else the directory's name
  Summary summary;       // summary.run_dir is the run directory
  std::vector<ShareBar> shares;
  std::vector<StepSeries> steps;
  Timeline timeline;
  std::vector<RankTotals> rank_totals;  // spans, in Summary.spans order
  // Disaggregated stages: each rank's role by its <stage>/rounds span, as in
  // role_idle.h ("generation", "trainer", ...); empty for colocated runs. Ranks
  // of different roles do different work, so only ranks of one role are compared.
  std::vector<std::pair<int64_t, std::string>> rank_roles;
  std::vector<CommPlacement> comm_parents;
  int64_t metrics_lines = 0, metrics_skipped = 0;  // metrics.jsonl lines read; not JSON objects
  EstimateComparison estimate;                       // with --estimate PROFILE; empty otherwise
  MemoryPeaks memory;  // metrics.jsonl's peak memory per stage and rank (plan_bytes filled by the CLI)
  std::vector<Observation> observations;
  // The training half: runs[0] is this run; further runs (an overlay) add their
  // curves, configs and samples, while every systems section stays runs[0]'s.
  std::vector<RunResults> runs;
};

// Makes the predicted-beside-measured table from a run's traces (cost::compare_with_run behind it).
using Estimator = std::function<EstimateComparison(const std::vector<TraceFile>& files)>;

// Everything the page shows, from already-read trace files and the text of
// metrics.jsonl ("" when there is none); observations included.
ReportData collect_report(const std::vector<TraceFile>& files, const std::string& metrics_jsonl,
                          const std::string& run_dir = "");
// Reads RUN_DIR/trace/rank-*.json and RUN_DIR/metrics.jsonl. InputError when
// RUN_DIR is missing or holds no trace files, or a trace file is malformed.
// With an `estimate`, the prediction beside each span and its observations too.
ReportData collect_run_report(const std::string& run_dir, const Estimator& estimate = nullptr);

// Several runs overlaid: collect_run_report of the first, and every further
// run's metrics.jsonl, config and samples in `runs`, each labelled by its
// directory's name (by the path as given where two names coincide).
// InputError when a further run directory is missing or has no metrics.jsonl.
ReportData collect_runs_report(const std::vector<std::string>& run_dirs, const Estimator& estimate = nullptr);

// The observations the data supports, largest `seconds` first, at most kMaxObservations.
std::vector<Observation> observe(const ReportData& data);

// The whole HTML document.
std::string render_report_html(const ReportData& data);

// collect_run_report + render, written atomically to `out_path` (default
// RUN_DIR/report.html). Returns the path written.
std::string write_report(const std::string& run_dir, const std::string& out_path, ReportData* data = nullptr,
                         const Estimator& estimate = nullptr);
// collect_runs_report + render, written atomically to `out_path` (default
// report.html in the first run's directory). Returns the path written.
std::string write_runs_report(const std::vector<std::string>& run_dirs, const std::string& out_path,
                              ReportData* data = nullptr, const Estimator& estimate = nullptr);

}  // namespace hpcrl::trace
