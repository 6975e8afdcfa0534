// Where the time went, across ranks: the statistics behind
// `hpcrl trace summarize RUN_DIR`. Every rank's trace file is merged; spans are
// grouped by name, communicator calls by (op, group). docs/tracing.md defines
// each column; in short, for one span name over all ranks:
//   count, total_s        number of events and the sum of their durations
//   mean/p50/p95_s        per event (percentiles interpolate linearly between order statistics)
//   max_rank_s            the largest per-rank total
//   imbalance             max_rank_s / mean of the per-rank totals (ranks that recorded it)
//   share                 total_s / total_s of the parent span (name up to the last '/');
//                         top-level spans: / the sum over ranks of each rank's traced wall time;
//                         NaN when the parent span was never recorded
// With pipeline parallelism, a bubble table per pp stage (bubble.h): the
// measured idle share of the pipelined steps next to (p−1)/(m+p−1). With tool
// calls, their time against the decode steps that overlapped it (tool_overlap.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/trace/bubble.h"
#include "hpcrl/trace/role_idle.h"
#include "hpcrl/trace/tool_overlap.h"
#include "hpcrl/trace/reader.h"

namespace hpcrl::trace {

struct DurationStats {
  int64_t count = 0;
  int ranks = 0;
  double total_s = 0, mean_s = 0, p50_s = 0, p95_s = 0, max_rank_s = 0, imbalance = 0;
};

struct SpanStats : DurationStats {
  std::string name;
  std::string parent;  // "" for a top-level span
  double share = 0;
};

struct CommStats : DurationStats {
  std::string op;
  std::string group;  // comm_group_key() of the recorded group
  double bytes = 0;
  double gbytes_per_s = 0;  // bytes / total_s / 1e9 (0 when no time was recorded)
};

struct FileStats {
  std::string path;
  int64_t events = 0;   // complete events read
  int64_t skipped = 0;  // events cut off by a crash
  bool terminated = false;
};

struct Summary {
  std::string run_dir;
  std::vector<FileStats> files;
  std::vector<int64_t> ranks;  // pids seen in "X" events
  double wall_s = 0;           // longest rank's traced interval (first event start to last event end)
  double rank_wall_sum_s = 0;  // sum of the ranks' traced intervals (denominator of top-level shares)
  int64_t events = 0, skipped_events = 0;
  std::vector<SpanStats> spans;  // tree order: children after their parent, siblings by first start
  std::vector<CommStats> comm;   // by op, then group
  std::vector<BubbleStats> bubbles;  // pipeline parallelism: measured vs theoretical bubble per pp stage
  std::vector<RoleIdleStats> roles;  // disaggregated RL: busy and waiting shares per role
  std::optional<ToolOverlapStats> tools;  // multi-turn rollouts: call time against decode time
};

// "policy/tp[3]" -> "policy/tp": groups of one kind (every tp group) are summed together.
std::string comm_group_key(const std::string& group);

// Statistics over already-read files.
Summary summarize(const std::vector<TraceFile>& files);
// Reads RUN_DIR/trace/rank-*.json in rank order. InputError when RUN_DIR or its
// trace files are missing, or a file is malformed (naming the file).
std::vector<TraceFile> read_run_traces(const std::string& run_dir);
// summarize(read_run_traces(run_dir)).
Summary summarize_run(const std::string& run_dir);

std::string format_markdown(const Summary& s);
std::string format_csv(const Summary& s);
std::string format_json(const Summary& s);  // one JSON document (NaN shares are null)

// Writes <trace_dir>/summary.md and summary.csv, each atomically.
void write_summary(const Summary& s, const std::string& trace_dir);

}  // namespace hpcrl::trace
