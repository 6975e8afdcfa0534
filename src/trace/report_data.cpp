// What the report shows (report.h), gathered from the rank traces and
// metrics.jsonl. Span statistics come from summarize(); what summarize() does
// not keep is measured here from the events:
//   - which span each span ran inside in time (names do not say: grpo/rollout
//     is named under grpo but runs inside grpo/iteration), for the share bars;
//   - which span each collective ran inside, for "a collective takes X % of";
//   - per-rank totals, to name the slow rank behind an imbalance.
// "Inside" is decided per rank and lane: events on one lane nest (they are
// scopes on one thread), so a stack over them sorted by start finds each
// event's innermost enclosing event.
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "report_parts.h"

namespace hpcrl::trace {
namespace {

namespace stdfs = std::filesystem;

// Timestamps carry nanosecond digits; a child that ends on its parent's last
// nanosecond must still count as inside despite rounding.
constexpr double kNestSlackUs = 1e-3;

bool contains(const Event& outer, const Event& inner) {
  return inner.ts_us >= outer.ts_us - kNestSlackUs &&
         inner.ts_us + inner.dur_us <= outer.ts_us + outer.dur_us + kNestSlackUs;
}

// The span events of one rank and lane, sorted by start (longer first on a
// tie, so a parent precedes a child that starts with it), and for each the
// index of its innermost enclosing event (-1 at the top).
struct LaneForest {
  std::vector<const Event*> events;
  std::vector<int> parent;
};

std::map<std::pair<int64_t, int64_t>, LaneForest> lane_forests(const std::vector<TraceFile>& files) {
  std::map<std::pair<int64_t, int64_t>, LaneForest> forests;
  for (const auto& f : files)
    for (const auto& e : f.events)
      if (e.ph == "X" && e.cat != "comm") forests[{e.pid, e.tid}].events.push_back(&e);
  for (auto& [key, forest] : forests) {
    auto& ev = forest.events;
    std::stable_sort(ev.begin(), ev.end(), [](const Event* a, const Event* b) {
      return a->ts_us != b->ts_us ? a->ts_us < b->ts_us : a->dur_us > b->dur_us;
    });
    std::vector<int> stack;
    forest.parent.assign(ev.size(), -1);
    for (size_t i = 0; i < ev.size(); ++i) {
      while (!stack.empty() && !contains(*ev[stack.back()], *ev[i])) stack.pop_back();
      forest.parent[i] = stack.empty() ? -1 : stack.back();
      stack.push_back(static_cast<int>(i));
    }
  }
  return forests;
}

// inside[parent][child]: seconds of `child` events whose innermost enclosing
// event is a `parent` event ("" for none), over all ranks and lanes.
using InsideSeconds = std::map<std::string, std::map<std::string, double>>;

InsideSeconds inside_seconds(const std::map<std::pair<int64_t, int64_t>, LaneForest>& forests) {
  InsideSeconds inside;
  for (const auto& [key, forest] : forests)
    for (size_t i = 0; i < forest.events.size(); ++i) {
      int p = forest.parent[i];
      const std::string& parent = p < 0 ? std::string() : forest.events[p]->name;
      inside[parent][forest.events[i]->name] += forest.events[i]->dur_us * 1e-6;
    }
  return inside;
}

// Each span's time parent: the span most of its time ran inside ("" for top level).
std::map<std::string, std::string> time_parents(const InsideSeconds& inside) {
  std::map<std::string, std::pair<std::string, double>> best;
  for (const auto& [parent, children] : inside)
    for (const auto& [child, s] : children) {
      auto it = best.find(child);
      if (it == best.end() || s > it->second.second) best[child] = {parent, s};
    }
  std::map<std::string, std::string> out;
  for (const auto& [child, p] : best) out[child] = p.first;
  return out;
}

// Bars depth-first from the top-level spans (those that mostly ran outside
// every other span), children in Summary.spans order (tree order: by first
// start), so the page reads like the run went. A bar lists every span that
// ran directly inside it, also one that mostly ran elsewhere (rollout/decode
// inside grpo/rollout and inside eval); each span's own bar is drawn once,
// under the first parent that reaches it.
std::vector<ShareBar> share_bars(const Summary& s, const InsideSeconds& inside) {
  const auto parents = time_parents(inside);
  std::map<std::string, double> totals;
  for (const auto& st : s.spans) totals[st.name] = st.total_s;
  std::vector<ShareBar> bars;
  std::set<std::string> visited;  // also what stops a cycle, which only malformed nesting makes
  std::function<void(const std::string&, int)> visit = [&](const std::string& span, int depth) {
    auto children = inside.find(span);
    if (!visited.insert(span).second || children == inside.end()) return;
    ShareBar bar{span, depth, totals[span], {}};
    for (const auto& st : s.spans) {
      auto child = children->second.find(st.name);
      if (st.name != span && child != children->second.end()) bar.parts.emplace_back(st.name, child->second);
    }
    if (bar.parts.empty()) return;
    bars.push_back(bar);
    for (const auto& [child, seconds] : bar.parts) visit(child, depth + 1);
  };
  for (const auto& st : s.spans) {
    auto parent = parents.find(st.name);
    if (parent != parents.end() && parent->second.empty()) visit(st.name, 0);
  }
  return bars;
}

// The innermost span on the same rank (any lane) that contains `c`, or null.
const Event* enclosing_span(const Event& c, const std::map<std::pair<int64_t, int64_t>, LaneForest>& forests) {
  const Event* best = nullptr;
  for (auto it = forests.lower_bound({c.pid, INT64_MIN}); it != forests.end() && it->first.first == c.pid; ++it) {
    const auto& ev = it->second.events;
    auto after = std::upper_bound(ev.begin(), ev.end(), c.ts_us + kNestSlackUs,
                                  [](double ts, const Event* e) { return ts < e->ts_us; });
    if (after == ev.begin()) continue;
    // The last span starting before `c`, then up its ancestors to the first that holds `c`.
    for (int i = static_cast<int>(after - ev.begin()) - 1; i >= 0; i = it->second.parent[i]) {
      if (!contains(*ev[i], c)) continue;
      if (!best || ev[i]->dur_us < best->dur_us) best = ev[i];
      break;
    }
  }
  return best;
}

using Interval = std::pair<double, double>;  // start, end in µs

// Seconds covered by `intervals` (sorted in place), overlaps counted once.
double union_seconds(std::vector<Interval>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  double covered_us = 0, open_from = 0, open_to = -INFINITY;
  for (const auto& [from, to] : intervals) {
    if (from > open_to) {
      if (open_to > open_from) covered_us += open_to - open_from;
      open_from = from;
    }
    open_to = std::max(open_to, to);
  }
  if (open_to > open_from) covered_us += open_to - open_from;
  return covered_us * 1e-6;
}

std::vector<CommPlacement> comm_placements(const std::vector<TraceFile>& files, const Summary& s,
                                           const std::map<std::pair<int64_t, int64_t>, LaneForest>& forests) {
  using Collective = std::pair<std::string, std::string>;                                       // op, group key
  std::map<Collective, std::map<std::string, std::map<int64_t, std::vector<Interval>>>> calls;  // -> span -> rank
  std::map<Collective, std::map<int64_t, std::vector<Interval>>> per_rank;                      // overlap check
  for (const auto& f : files)
    for (const auto& e : f.events) {
      if (e.ph != "X" || e.cat != "comm") continue;
      const Event* parent = enclosing_span(e, forests);
      Collective key{e.name, comm_group_key(e.group)};
      Interval call{e.ts_us, e.ts_us + e.dur_us};
      calls[key][parent ? parent->name : ""][e.pid].push_back(call);
      per_rank[key][e.pid].push_back(call);
    }
  std::map<std::string, double> totals;
  for (const auto& st : s.spans) totals[st.name] = st.total_s;
  std::vector<CommPlacement> out;
  for (const auto& c : s.comm) {
    CommPlacement best{c.op, c.group, "", -1, 0, false};
    for (auto& [span, ranks] : calls[{c.op, c.group}]) {
      double seconds = 0;
      for (auto& [rank, intervals] : ranks) seconds += union_seconds(intervals);
      if (seconds > best.seconds) best.parent = span, best.seconds = seconds;
    }
    if (best.seconds < 0) continue;
    best.parent_s = best.parent.empty() ? 0.0 : totals[best.parent];
    for (auto& [rank, intervals] : per_rank[{c.op, c.group}]) {
      std::sort(intervals.begin(), intervals.end());
      for (size_t i = 1; i < intervals.size(); ++i)
        best.overlapping = best.overlapping || intervals[i].first < intervals[i - 1].second - kNestSlackUs;
    }
    out.push_back(best);
  }
  return out;
}

std::vector<RankTotals> rank_totals(const std::vector<TraceFile>& files, const Summary& s) {
  std::map<std::string, std::map<int64_t, double>> totals;
  for (const auto& f : files)
    for (const auto& e : f.events)
      if (e.ph == "X" && e.cat != "comm") totals[e.name][e.pid] += e.dur_us * 1e-6;
  std::vector<RankTotals> out;
  for (const auto& st : s.spans) {
    const auto& by_rank = totals[st.name];
    out.push_back({st.name, {by_rank.begin(), by_rank.end()}});
  }
  return out;
}

// The role of each rank that recorded a rounds span, by role_idle.cpp's rule
// (its args say which role the rank has); a rank with several stages keeps the first.
std::vector<std::pair<int64_t, std::string>> rank_roles(const std::vector<TraceFile>& files) {
  std::map<int64_t, std::string> roles;
  for (const auto& f : files)
    for (const auto& e : f.events) {
      size_t slash = e.name.find('/');
      if (e.ph != "X" || slash == std::string::npos || e.name.substr(slash + 1) != "rounds") continue;
      const char* role = arg_value(e, "generates") != 0 ? "generation"
                         : arg_value(e, "scores") != 0  ? "reference/critic"
                         : arg_value(e, "rewards") != 0 ? "reward model"
                                                        : "trainer";
      roles.emplace(e.pid, role);
    }
  return {roles.begin(), roles.end()};
}

// "b" of "a/b" and of "a/b/": a run's name in the legend.
std::string directory_name(const std::string& run_dir) {
  std::string name = stdfs::path(run_dir).lexically_normal().filename().string();
  if (name.empty()) name = stdfs::path(run_dir).lexically_normal().parent_path().filename().string();
  return name;
}

// run.name from config.resolved.yaml (hpcrl writes it block-style: "run:" then
// "  name: X"), without a YAML parser in the trace module; else the directory's name.
std::string run_name(const std::string& run_dir) {
  std::ifstream in(stdfs::path(run_dir) / "config.resolved.yaml");
  std::string line;
  bool in_run = false;
  while (in && std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#')
      in_run = line == "run:";
    else if (in_run && line.rfind("  name: ", 0) == 0)
      return line.substr(8);
  }
  return directory_name(run_dir);
}

}  // namespace

ReportData collect_report(const std::vector<TraceFile>& files, const std::string& metrics_jsonl,
                          const std::string& run_dir) {
  ReportData d;
  d.summary = summarize(files);
  d.summary.run_dir = run_dir;
  d.run_name = run_dir.empty() ? std::string("run") : run_name(run_dir);
  auto forests = lane_forests(files);
  d.shares = share_bars(d.summary, inside_seconds(forests));
  d.comm_parents = comm_placements(files, d.summary, forests);
  d.rank_totals = rank_totals(files, d.summary);
  d.rank_roles = rank_roles(files);
  d.steps = report::step_series(files, d.summary, metrics_jsonl, d.metrics_lines, d.metrics_skipped);
  d.timeline = report::representative_timeline(files, d.summary);
  d.observations = observe(d);
  d.runs.resize(1);  // this run's training half; collect_run_report adds its config and samples
  d.runs[0].label = run_dir.empty() ? std::string("run") : directory_name(run_dir);
  d.runs[0].metrics = parse_metrics_lines(metrics_jsonl);
  d.memory = memory_peaks_from_metrics(d.runs[0].metrics);
  return d;
}

ReportData collect_run_report(const std::string& run_dir, const Estimator& estimate) {
  std::vector<TraceFile> files = read_run_traces(run_dir);
  std::string metrics;
  stdfs::path metrics_path = stdfs::path(run_dir) / "metrics.jsonl";
  std::error_code ec;
  if (stdfs::is_regular_file(metrics_path, ec)) metrics = fs::read_file(metrics_path.string(), "metrics file");
  ReportData d = collect_report(files, metrics, run_dir);
  read_config_and_samples(run_dir, d.runs.front());
  if (estimate) {
    d.estimate = estimate(files);
    d.observations = observe(d);  // again, with the estimate's findings
  }
  return d;
}

std::string write_report(const std::string& run_dir, const std::string& out_path, ReportData* data,
                         const Estimator& estimate) {
  ReportData d = collect_run_report(run_dir, estimate);
  std::string path = out_path.empty() ? (stdfs::path(run_dir) / "report.html").string() : out_path;
  fs::write_file_atomic(path, render_report_html(d));
  if (data) *data = std::move(d);
  return path;
}

namespace {

// A further run of an overlay: its metrics (required), config and samples.
RunResults overlay_run(const std::string& run_dir) {
  std::error_code ec;
  HPCRL_CHECK_INPUT(stdfs::is_directory(run_dir, ec),
                    run_dir << ": no such run directory (give the --out directory of an `hpcrl run`)");
  stdfs::path metrics = stdfs::path(run_dir) / "metrics.jsonl";
  HPCRL_CHECK_INPUT(stdfs::is_regular_file(metrics, ec),
                    metrics.string() << " does not exist: an overlaid run needs its learning curves (run it with "
                                        "trace: {metrics: true}, the default, or leave it out)");
  RunResults run;
  run.label = directory_name(run_dir);
  run.metrics = parse_metrics_lines(fs::read_file(metrics.string(), "metrics file"));
  read_config_and_samples(run_dir, run);
  return run;
}

}  // namespace

ReportData collect_runs_report(const std::vector<std::string>& run_dirs, const Estimator& estimate) {
  HPCRL_CHECK_INPUT(!run_dirs.empty(), "no run directory given (hpcrl report RUN_DIR [RUN_DIR ...])");
  ReportData d = collect_run_report(run_dirs.front(), estimate);
  for (size_t i = 1; i < run_dirs.size(); ++i) d.runs.push_back(overlay_run(run_dirs[i]));
  for (size_t i = 0; i < d.runs.size(); ++i)  // two runs named alike: both by their paths as given
    for (size_t j = 0; j < d.runs.size(); ++j)
      if (i != j && directory_name(run_dirs[i]) == directory_name(run_dirs[j])) d.runs[i].label = run_dirs[i];
  return d;
}

std::string write_runs_report(const std::vector<std::string>& run_dirs, const std::string& out_path,
                              ReportData* data, const Estimator& estimate) {
  ReportData d = collect_runs_report(run_dirs, estimate);
  std::string path = out_path.empty() ? (stdfs::path(run_dirs.front()) / "report.html").string() : out_path;
  fs::write_file_atomic(path, render_report_html(d));
  if (data) *data = std::move(d);
  return path;
}

}  // namespace hpcrl::trace
