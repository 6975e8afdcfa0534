// Helpers shared by the trace tests: scratch directories, and an independent
// reading of trace files and their statistics. "Independent" matters: the
// expected numbers for `summarize` are computed here from the raw events with
// plain code (line-by-line JSON, no reader.cpp, no summary.cpp), so a mistake in
// the library cannot make its own test pass.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hpcrl/trace/reader.h"

namespace trace_test {

namespace stdfs = std::filesystem;

// A complete ("X") span event of rank `pid` on `lane`, as the reader makes them.
inline hpcrl::trace::Event span_event(const std::string& name, int64_t pid, double ts, double dur,
                                      hpcrl::trace::Args args = {}, int64_t lane = 0) {
  hpcrl::trace::Event e;
  e.name = name;
  e.cat = "span";
  e.ph = "X";
  e.pid = pid;
  e.tid = lane;
  e.ts_us = ts;
  e.dur_us = dur;
  e.args = std::move(args);
  return e;
}

// A fresh directory under the system temp dir, removed at scope end.
struct TempDir {
  stdfs::path path;
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path = stdfs::temp_directory_path() /
           ("hpcrl_trace_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    stdfs::remove_all(path);
    stdfs::create_directories(path);
  }
  ~TempDir() { stdfs::remove_all(path); }
  std::string str() const { return path.string(); }
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A shell command's exit code and standard output.
struct Shell {
  int code = -1;
  std::string out;
};

inline Shell shell(const std::string& cmd) {
  Shell r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string recorded_run(const char* name) { return std::string(HPCRL_SOURCE_DIR) + "/tests/trace/data/" + name; }

// Copies a committed run to a scratch dir, so tests never write into the source tree.
inline void copy_run(const std::string& from, const stdfs::path& to) {
  stdfs::create_directories(to);
  stdfs::copy(from, to, stdfs::copy_options::recursive);
}

// The complete events of a file hpcrl wrote (one event per line): every line that
// parses as a JSON object once its separator comma is removed. A cut-off last
// line does not parse and is not counted.
inline std::vector<nlohmann::json> raw_events(const std::string& path) {
  std::vector<nlohmann::json> events;
  std::istringstream lines(read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == ',') line.pop_back();
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) events.push_back(j);
  }
  return events;
}

struct RawStat {
  long count = 0;
  double total_s = 0;
  double bytes = 0;
  std::map<long, double> rank_s;
  std::vector<double> durations_s;
  double imbalance() const {
    double max = 0;
    for (auto& [r, s] : rank_s) max = std::max(max, s);
    return max / (total_s / rank_s.size());
  }
  double max_rank_s() const {
    double max = 0;
    for (auto& [r, s] : rank_s) max = std::max(max, s);
    return max;
  }
  double percentile(double p) const {
    std::vector<double> v = durations_s;
    std::sort(v.begin(), v.end());
    double rank = p * (v.size() - 1);
    size_t below = static_cast<size_t>(rank);
    if (below + 1 >= v.size()) return v.back();
    return v[below] * (1 - (rank - below)) + v[below + 1] * (rank - below);
  }
};

struct RawSummary {
  std::map<std::string, RawStat> spans;
  std::map<std::string, RawStat> comm;  // key "op|group" with a trailing [k] removed from the group
  double rank_wall_sum_s = 0;
  long events = 0;
};

inline RawSummary raw_summary(const std::vector<std::string>& files) {
  RawSummary r;
  std::map<long, std::pair<double, double>> wall;
  for (const auto& f : files) {
    for (const auto& e : raw_events(f)) {
      ++r.events;
      if (e["ph"] != "X") continue;
      long pid = e["pid"].get<long>();
      double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
      auto it = wall.find(pid);
      if (it == wall.end()) wall[pid] = {ts, ts + dur};
      else it->second = {std::min(it->second.first, ts), std::max(it->second.second, ts + dur)};
      RawStat* st;
      if (e.value("cat", "") == "comm") {
        std::string group = e["args"]["group"];
        auto bracket = group.find('[');
        if (bracket != std::string::npos) group = group.substr(0, bracket);
        st = &r.comm[e["name"].get<std::string>() + "|" + group];
        st->bytes += e["args"]["bytes"].get<double>();
      } else {
        st = &r.spans[e["name"].get<std::string>()];
      }
      st->count += 1;
      st->total_s += dur / 1e6;
      st->rank_s[pid] += dur / 1e6;
      st->durations_s.push_back(dur / 1e6);
    }
  }
  for (auto& [pid, w] : wall) r.rank_wall_sum_s += (w.second - w.first) / 1e6;
  return r;
}

}  // namespace trace_test
