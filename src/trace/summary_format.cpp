// The three renderings of a trace Summary: a Markdown report (printed and
// written to trace/summary.md), a CSV with one row per span or collective for
// spreadsheets and plotting scripts, and the `--json` document. Markdown shows
// per-event times in milliseconds and shares in percent; CSV and JSON keep
// seconds and fractions, with the column names saying so.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hpcrl/trace/summary.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::trace {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt("%.0f", b) + " B" : fmt("%.2f", b) + " " + units[u];
}

// "0-3, 8" for a sorted rank list.
std::string rank_ranges(const std::vector<int64_t>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i) os << ", ";
    os << ranks[i];
    if (j > i) os << "-" << ranks[j];
    i = j + 1;
  }
  return os.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt("%.9g", v) : std::string(); }

void stats_json(nlohmann::ordered_json& j, const DurationStats& st) {
  j["count"] = st.count;
  j["ranks"] = st.ranks;
  j["total_s"] = st.total_s;
  j["mean_s"] = st.mean_s;
  j["p50_s"] = st.p50_s;
  j["p95_s"] = st.p95_s;
  j["max_rank_s"] = st.max_rank_s;
  j["imbalance"] = st.imbalance;
}

std::string stats_csv(const DurationStats& st) {
  return std::to_string(st.count) + "," + std::to_string(st.ranks) + "," + csv_number(st.total_s) + "," +
         csv_number(st.mean_s) + "," + csv_number(st.p50_s) + "," + csv_number(st.p95_s) + "," +
         csv_number(st.max_rank_s) + "," + csv_number(st.imbalance);
}

}  // namespace

namespace {
// The roles table of a disaggregated RL stage (nothing for colocated runs).
void format_roles(std::ostream& os, const std::vector<RoleIdleStats>& roles) {
  if (roles.empty()) return;
  os << "\n## Roles (disaggregated RL)\n\n"
     << "| stage | role | ranks | seconds | busy | waiting for data | waiting for weights |\n"
     << "|---|---|--:|--:|--:|--:|--:|\n";
  for (const auto& r : roles)
    os << "| " << r.stage << " | " << r.role << " | " << r.ranks << " | " << fmt("%.3f", r.seconds) << " | "
       << fmt("%.1f %%", 100 * r.busy) << " | " << fmt("%.1f %%", 100 * r.waiting_data) << " | "
       << fmt("%.1f %%", 100 * r.waiting_weights) << " |\n";
  os << "\nseconds: the role's <stage>/rounds spans summed over its ranks; waiting for data: receiving samples "
        "(a reference: requests; a reward model: scoring rounds); waiting for weights: in a weight sync, the transfer included.\n";
}
void format_tools(std::ostream& os, const std::optional<ToolOverlapStats>& t) {
  if (!t) return;
  os << "\n## Tool calls\n\n"
     << "| ranks | calls | call s | mean call ms | decode s | call time decoding |\n"
     << "|--:|--:|--:|--:|--:|--:|\n"
     << "| " << t->ranks << " | " << t->calls << " | " << fmt("%.3f", t->call_s) << " | "
     << fmt("%.3f", 1e3 * t->call_s / double(t->calls)) << " | " << fmt("%.3f", t->decode_s) << " | "
     << fmt("%.1f %%", 100 * t->hidden_share) << " |\n";
  os << "\ncall s: the rollout/tool spans (a call's start to the engine taking its reply) over all ranks; call time "
        "decoding: the share of it that a decode step of the same rank overlapped (hidden behind other rows).\n";
}
}  // namespace

std::string format_markdown(const Summary& s) {
  std::ostringstream os;
  os << "# Trace summary: " << s.run_dir << "\n\n";
  os << s.ranks.size() << (s.ranks.size() == 1 ? " rank" : " ranks") << " (" << rank_ranges(s.ranks) << ") · "
     << s.events << " events · wall " << fmt("%.3f", s.wall_s) << " s (longest rank)\n";
  for (const auto& f : s.files) {
    if (f.skipped)
      os << "\n**" << f.path << ": " << f.skipped << " event cut off mid-write (crashed run?) was skipped.**\n";
    else if (!f.terminated)
      os << "\n" << f.path << " has no closing ']' (the run crashed or is still running); all complete events read.\n";
  }
  os << "\n## Spans\n\n";
  if (s.spans.empty()) {
    os << "No spans were recorded.\n";
  } else {
    os << "| span | count | ranks | total s | mean ms | p50 ms | p95 ms | max rank s | imbalance | share |\n"
       << "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& st : s.spans) {
      os << "| " << st.name << " | " << st.count << " | " << st.ranks << " | " << fmt("%.3f", st.total_s) << " | "
         << fmt("%.3f", st.mean_s * 1e3) << " | " << fmt("%.3f", st.p50_s * 1e3) << " | "
         << fmt("%.3f", st.p95_s * 1e3) << " | " << fmt("%.3f", st.max_rank_s) << " | "
         << fmt("%.2f", st.imbalance) << " | " << (std::isnan(st.share) ? "–" : fmt("%.1f %%", st.share * 100))
         << " |\n";
    }
    os << "\nshare: of the parent span (name up to the last '/'); top-level spans: of the ranks' summed wall time.\n";
  }
  os << "\n## Communication\n\n";
  if (s.comm.empty()) {
    os << "No communicator calls were recorded.\n";
  } else {
    os << "| op | group | count | ranks | total s | mean ms | p95 ms | bytes | GB/s | max rank s | imbalance |\n"
       << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& st : s.comm) {
      os << "| " << st.op << " | " << (st.group.empty() ? "-" : st.group) << " | " << st.count << " | " << st.ranks
         << " | " << fmt("%.3f", st.total_s) << " | " << fmt("%.3f", st.mean_s * 1e3) << " | "
         << fmt("%.3f", st.p95_s * 1e3) << " | " << human_bytes(st.bytes) << " | " << fmt("%.2f", st.gbytes_per_s)
         << " | " << fmt("%.3f", st.max_rank_s) << " | " << fmt("%.2f", st.imbalance) << " |\n";
    }
  }
  if (!s.bubbles.empty()) {
    os << "\n## Pipeline bubble\n\n"
       << "| pp stage | ranks | steps | p | m | v | mean step ms | bubble measured | bubble theory |\n"
       << "|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& b : s.bubbles)
      os << "| " << b.stage << " | " << b.ranks << " | " << b.steps << " | " << fmt("%.0f", b.stages) << " | "
         << fmt("%.0f", b.microbatches) << " | " << fmt("%.0f", b.virtual_stages) << " | "
         << fmt("%.3f", b.mean_step_s * 1e3) << " | " << fmt("%.3f", b.measured) << " | " << fmt("%.3f", b.theory)
         << " |\n";
    os << "\nbubble measured: share of the pp/step spans outside pp/forward and pp/backward on the stage's lane; "
          "theory: (p−1)/(m+p−1) ((p−1)/(v·m+p−1) interleaved).\n";
  }
  format_roles(os, s.roles);
  format_tools(os, s.tools);
  return os.str();
}

std::string format_csv(const Summary& s) {
  std::string out =
      "kind,name,group,count,ranks,total_s,mean_s,p50_s,p95_s,max_rank_s,imbalance,share,bytes,gbytes_per_s\n";
  for (const auto& st : s.spans)
    out += "span," + csv_field(st.name) + ",," + stats_csv(st) + "," + csv_number(st.share) + ",,\n";
  for (const auto& st : s.comm)
    out += "comm," + csv_field(st.op) + "," + csv_field(st.group) + "," + stats_csv(st) + ",," +
           csv_number(st.bytes) + "," + csv_number(st.gbytes_per_s) + "\n";
  return out;
}

std::string format_json(const Summary& s) {
  nlohmann::ordered_json j;
  j["run_dir"] = s.run_dir;
  j["ranks"] = s.ranks;
  j["wall_s"] = s.wall_s;
  j["rank_wall_sum_s"] = s.rank_wall_sum_s;
  j["events"] = s.events;
  j["skipped_events"] = s.skipped_events;
  j["files"] = nlohmann::ordered_json::array();
  for (const auto& f : s.files)
    j["files"].push_back({{"path", f.path}, {"events", f.events}, {"skipped", f.skipped}, {"terminated", f.terminated}});
  j["spans"] = nlohmann::ordered_json::array();
  for (const auto& st : s.spans) {
    nlohmann::ordered_json row;
    row["name"] = st.name;
    row["parent"] = st.parent.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(st.parent);
    stats_json(row, st);
    row["share"] = st.share;  // NaN (parent never recorded) is dumped as null
    j["spans"].push_back(std::move(row));
  }
  j["comm"] = nlohmann::ordered_json::array();
  for (const auto& st : s.comm) {
    nlohmann::ordered_json row;
    row["op"] = st.op;
    row["group"] = st.group;
    stats_json(row, st);
    row["bytes"] = st.bytes;
    row["gbytes_per_s"] = st.gbytes_per_s;
    j["comm"].push_back(std::move(row));
  }
  j["pipeline_bubble"] = nlohmann::ordered_json::array();
  for (const auto& b : s.bubbles)
    j["pipeline_bubble"].push_back({{"stage", b.stage}, {"ranks", b.ranks}, {"steps", b.steps}, {"stages", b.stages},
                                    {"microbatches", b.microbatches}, {"virtual_stages", b.virtual_stages},
                                    {"mean_step_s", b.mean_step_s}, {"measured", b.measured}, {"theory", b.theory}});
  j["roles"] = nlohmann::ordered_json::array();
  for (const auto& r : s.roles)
    j["roles"].push_back({{"stage", r.stage}, {"role", r.role}, {"ranks", r.ranks}, {"seconds", r.seconds},
                          {"busy", r.busy}, {"waiting_data", r.waiting_data}, {"waiting_weights", r.waiting_weights}});
  if (s.tools)
    j["tool_calls"] = {{"ranks", s.tools->ranks}, {"calls", s.tools->calls}, {"call_s", s.tools->call_s},
                       {"decode_s", s.tools->decode_s}, {"hidden_share", s.tools->hidden_share}};
  return j.dump(2) + "\n";
}

void write_summary(const Summary& s, const std::string& trace_dir) {
  fs::write_file_atomic(trace_dir + "/summary.md", format_markdown(s));
  fs::write_file_atomic(trace_dir + "/summary.csv", format_csv(s));
}

}  // namespace hpcrl::trace
