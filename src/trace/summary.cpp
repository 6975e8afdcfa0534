// Merging rank traces into per-span and per-collective statistics (summary.h).
// Only complete ("X") events count; "cat":"comm" events are communicator calls,
// every other X event is a span. Per-rank totals are keyed by pid (= rank), so a
// file holding several ranks (a merged trace) is summarised correctly too.
#include "hpcrl/trace/summary.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::trace {
namespace {

struct Accumulator {
  std::vector<double> durations_s;
  std::map<int64_t, double> rank_total_s;
  double bytes = 0;
  double first_ts_us = std::numeric_limits<double>::infinity();

  void add(const Event& e) {
    double s = e.dur_us * 1e-6;
    durations_s.push_back(s);
    rank_total_s[e.pid] += s;
    first_ts_us = std::min(first_ts_us, e.ts_us);
  }
};

// Linear interpolation between order statistics (numpy's default).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double pos = p * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

void fill(DurationStats& st, Accumulator& acc) {
  std::sort(acc.durations_s.begin(), acc.durations_s.end());
  st.count = static_cast<int64_t>(acc.durations_s.size());
  st.ranks = static_cast<int>(acc.rank_total_s.size());
  st.total_s = 0;
  for (double d : acc.durations_s) st.total_s += d;
  st.mean_s = st.count ? st.total_s / static_cast<double>(st.count) : 0;
  st.p50_s = percentile(acc.durations_s, 0.50);
  st.p95_s = percentile(acc.durations_s, 0.95);
  st.max_rank_s = 0;
  for (const auto& [rank, total] : acc.rank_total_s) st.max_rank_s = std::max(st.max_rank_s, total);
  double mean_rank = st.ranks ? st.total_s / st.ranks : 0;
  st.imbalance = mean_rank > 0 ? st.max_rank_s / mean_rank : 1.0;
}

std::string parent_of(const std::string& name) {
  size_t slash = name.rfind('/');
  return slash == std::string::npos ? std::string() : name.substr(0, slash);
}

// Sort key placing a span after its ancestors and siblings by when their subtree
// first started: per path component, (first start of that prefix's subtree, component).
using TreeKey = std::vector<std::pair<double, std::string>>;

std::vector<std::string> tree_order(const std::map<std::string, Accumulator>& spans) {
  std::map<std::string, double> subtree_first;
  for (const auto& [name, acc] : spans) {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (i != name.size() && name[i] != '/') continue;
      auto prefix = name.substr(0, i);
      auto it = subtree_first.emplace(prefix, acc.first_ts_us).first;
      it->second = std::min(it->second, acc.first_ts_us);
    }
  }
  std::vector<std::pair<TreeKey, std::string>> keyed;
  for (const auto& [name, acc] : spans) {
    TreeKey key;
    size_t from = 0;
    for (size_t i = 0; i <= name.size(); ++i) {
      if (i != name.size() && name[i] != '/') continue;
      key.emplace_back(subtree_first[name.substr(0, i)], name.substr(from, i - from));
      from = i + 1;
    }
    keyed.emplace_back(std::move(key), name);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> names;
  for (auto& [key, name] : keyed) names.push_back(name);
  return names;
}

bool is_rank_file(const std::string& file) {
  if (!str::starts_with(file, "rank-") || !str::ends_with(file, ".json") || file.size() <= 10) return false;
  std::string digits = file.substr(5, file.size() - 10);
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string comm_group_key(const std::string& group) {
  if (group.size() < 3 || group.back() != ']') return group;
  size_t open = group.rfind('[');
  if (open == std::string::npos || open + 2 > group.size() - 1) return group;
  for (size_t i = open + 1; i + 1 < group.size(); ++i)
    if (group[i] < '0' || group[i] > '9') return group;
  return group.substr(0, open);
}

namespace {
// The files' complete events gathered by what the summary reports them under.
struct Gathered {
  std::map<std::string, Accumulator> spans;
  std::map<std::pair<std::string, std::string>, Accumulator> comms;  // (op, group)
  // A rank's wall time: its first span's start to its last span's end, summed over the
  // processes that wrote its file. A resumed run appends to the file of the run it resumes,
  // each process starting with its process_name record; the time between them (a job
  // waiting in the queue) is no rank's.
  std::map<int64_t, std::vector<std::pair<double, double>>> rank_intervals_us;
};

// Every file's events into `g`; the files' counts into `s`.
void gather_events(const std::vector<TraceFile>& files, Summary& s, Gathered& g) {
  for (const auto& f : files) {
    FileStats file{f.path, static_cast<int64_t>(f.events.size()), f.skipped, f.terminated};
    s.files.push_back(file);
    s.events += file.events;
    s.skipped_events += file.skipped;
    std::map<int64_t, bool> process_started;  // a process_name record since the rank's last span
    for (const auto& e : f.events) {
      if (e.ph == "M" && e.name == "process_name") process_started[e.pid] = true;
      if (e.ph != "X") continue;
      auto& intervals = g.rank_intervals_us[e.pid];
      if (intervals.empty() || process_started[e.pid]) intervals.emplace_back(e.ts_us, e.ts_us + e.dur_us);
      process_started[e.pid] = false;
      intervals.back().first = std::min(intervals.back().first, e.ts_us);
      intervals.back().second = std::max(intervals.back().second, e.ts_us + e.dur_us);
      if (e.cat == "comm") {
        auto& acc = g.comms[{e.name, comm_group_key(e.group)}];
        acc.add(e);
        for (const auto& [key, value] : e.args)
          if (key == "bytes") acc.bytes += value;
      } else {
        g.spans[e.name].add(e);
      }
    }
  }
}

// The spans in tree order, each with its share of its parent's time (of the ranks' wall time at the top).
void add_span_stats(Summary& s, std::map<std::string, Accumulator>& spans) {
  for (const auto& name : tree_order(spans)) {
    SpanStats st;
    st.name = name;
    st.parent = parent_of(name);
    fill(st, spans[name]);
    s.spans.push_back(std::move(st));
  }
  std::map<std::string, double> totals;
  for (const auto& st : s.spans) totals[st.name] = st.total_s;
  for (auto& st : s.spans) {
    double whole = s.rank_wall_sum_s;
    if (!st.parent.empty()) {
      auto it = totals.find(st.parent);
      whole = it == totals.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
    }
    st.share = whole > 0 ? st.total_s / whole : (std::isnan(whole) ? whole : 0.0);
  }
}

void add_comm_stats(Summary& s, std::map<std::pair<std::string, std::string>, Accumulator>& comms) {
  for (auto& [key, acc] : comms) {
    CommStats st;
    st.op = key.first;
    st.group = key.second;
    fill(st, acc);
    st.bytes = acc.bytes;
    st.gbytes_per_s = st.total_s > 0 ? st.bytes / st.total_s / 1e9 : 0;
    s.comm.push_back(std::move(st));
  }
}
}  // namespace

Summary summarize(const std::vector<TraceFile>& files) {
  Summary s;
  Gathered g;
  gather_events(files, s, g);
  for (const auto& [rank, intervals] : g.rank_intervals_us) {
    double wall = 0;
    for (const auto& [first, last] : intervals) wall += (last - first) * 1e-6;
    s.ranks.push_back(rank);
    s.wall_s = std::max(s.wall_s, wall);
    s.rank_wall_sum_s += wall;
  }
  add_span_stats(s, g.spans);
  add_comm_stats(s, g.comms);
  s.bubbles = pipeline_bubbles(files);
  s.roles = role_idle(files);
  s.tools = tool_overlap(files);
  return s;
}

std::vector<TraceFile> read_run_traces(const std::string& run_dir) {
  namespace stdfs = std::filesystem;
  std::error_code ec;
  if (!stdfs::exists(run_dir, ec))
    throw InputError("run directory not found: " + run_dir + " (give the directory a run wrote, e.g. runs/quickstart)");
  if (!stdfs::is_directory(run_dir, ec))
    throw InputError(run_dir + " is not a directory; give the run directory (the one holding trace/)");
  stdfs::path trace_dir = stdfs::path(run_dir) / "trace";
  std::vector<std::string> paths;
  if (stdfs::is_directory(trace_dir, ec)) {
    for (const auto& entry : stdfs::directory_iterator(trace_dir, ec))
      if (entry.is_regular_file() && is_rank_file(entry.path().filename().string()))
        paths.push_back(entry.path().string());
  }
  if (paths.empty())
    throw InputError("no trace files in " + trace_dir.string() +
                     " (expected rank-NNNNN.json; run with `trace: {chrome: true}` to record them)");
  std::sort(paths.begin(), paths.end());
  std::vector<TraceFile> files;
  for (const auto& p : paths) files.push_back(read_trace_file(p));
  return files;
}

Summary summarize_run(const std::string& run_dir) {
  Summary s = summarize(read_run_traces(run_dir));
  s.run_dir = run_dir;
  return s;
}

}  // namespace hpcrl::trace
