// The representative step of the report's timeline: of the longest stage (the
// top-level span with the most time that has an iteration or step span), the
// iteration/step event of median duration — a typical step, neither the
// warm-up nor an outlier — and everything every rank did during its interval.
// Ranks' timestamps are Unix time, so one interval cuts all ranks' files.
// Without step spans the longest top-level span's median event stands in.
#include <algorithm>
#include <map>
#include <set>

#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

// Enough for every span and collective of a step on dozens of ranks; beyond it
// the page would take seconds to draw, and the shortest events are sub-pixel.
constexpr size_t kMaxTimelineEvents = 4000;

// The span whose median event is drawn: see the file comment.
std::string timeline_span(const Summary& s) {
  std::map<std::string, double> totals;
  for (const auto& st : s.spans) totals[st.name] = st.total_s;
  std::string best;
  double best_s = -1;
  for (const auto& st : s.spans) {
    if (!is_step_span(s, st.name)) continue;
    double stage_s = totals[step_stage(st.name)];
    if (stage_s > best_s) best = st.name, best_s = stage_s;
  }
  if (!best.empty()) return best;
  for (const auto& st : s.spans)
    if (st.parent.empty() && st.total_s > best_s) best = st.name, best_s = st.total_s;
  return best;
}

const Event* median_event(const std::vector<TraceFile>& files, const std::string& span, int64_t& candidates) {
  std::vector<const Event*> events;
  for (const auto& f : files)
    for (const auto& e : f.events)
      if (e.ph == "X" && e.cat != "comm" && e.name == span) events.push_back(&e);
  candidates = static_cast<int64_t>(events.size());
  if (events.empty()) return nullptr;
  std::stable_sort(events.begin(), events.end(), [](const Event* a, const Event* b) {
    return a->dur_us != b->dur_us ? a->dur_us < b->dur_us : a->pid < b->pid;
  });
  return events[(events.size() - 1) / 2];  // the lower median: an event that happened
}

// Nesting levels on each lane: the stack of open enclosing events, as in Perfetto.
void assign_depths(std::vector<TimelineEvent>& events) {
  std::stable_sort(events.begin(), events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.dur_s > b.dur_s;
  });
  std::vector<const TimelineEvent*> stack;
  for (size_t i = 0; i < events.size(); ++i) {
    TimelineEvent& e = events[i];
    if (i == 0 || events[i - 1].rank != e.rank || events[i - 1].lane != e.lane) stack.clear();
    constexpr double kSlack = 1e-9;  // seconds; the trace's nanosecond digits
    while (!stack.empty() && stack.back()->start_s + stack.back()->dur_s < e.start_s + e.dur_s - kSlack)
      stack.pop_back();
    e.depth = static_cast<int>(stack.size());
    stack.push_back(&e);
  }
}

// Keeps the longest kMaxTimelineEvents events (the rest are the narrowest on the page).
int64_t drop_shortest(std::vector<TimelineEvent>& events) {
  if (events.size() <= kMaxTimelineEvents) return 0;
  std::vector<double> durs;
  for (const auto& e : events) durs.push_back(e.dur_s);
  std::nth_element(durs.begin(), durs.end() - kMaxTimelineEvents, durs.end());
  const double cut = *(durs.end() - kMaxTimelineEvents);  // the shortest duration kept
  size_t longer = std::count_if(events.begin(), events.end(), [&](const TimelineEvent& e) { return e.dur_s > cut; });
  size_t ties_kept = kMaxTimelineEvents - longer;  // events of exactly `cut`, first ones first
  const size_t before = events.size();
  std::vector<TimelineEvent> kept;
  for (auto& e : events)
    if (e.dur_s > cut || (e.dur_s == cut && ties_kept > 0 && ties_kept--)) kept.push_back(std::move(e));
  events = std::move(kept);
  return static_cast<int64_t>(before - events.size());
}

}  // namespace

Timeline representative_timeline(const std::vector<TraceFile>& files, const Summary& summary) {
  Timeline t;
  t.span = timeline_span(summary);
  if (t.span.empty()) return t;
  const Event* chosen = median_event(files, t.span, t.candidates);
  if (!chosen) return t;
  t.rank = chosen->pid;
  for (const auto& [key, value] : chosen->args)
    if (key == "step") t.step = value;
  const double start = chosen->ts_us, end = chosen->ts_us + chosen->dur_us;
  t.window_s = chosen->dur_us * 1e-6;
  std::set<std::pair<int64_t, int64_t>> lanes;
  for (const auto& f : files)
    for (const auto& e : f.events) {
      if (e.ph != "X") continue;
      lanes.insert({e.pid, e.tid});  // every lane, so a rank idle in this step shows as an empty row
      if (e.ts_us >= end || e.ts_us + e.dur_us <= start) continue;
      // Unclipped for now: the nesting of the events that the window cuts
      // (the stage around the step) needs their real extent.
      t.events.push_back({e.name, e.cat == "comm", e.group, arg_value(e, "bytes"), e.pid, e.tid, 0,
                          (e.ts_us - start) * 1e-6, e.dur_us * 1e-6});
    }
  assign_depths(t.events);
  for (auto& e : t.events) {
    double from = std::max(e.start_s, 0.0), to = std::min(e.start_s + e.dur_s, t.window_s);
    e.start_s = from;
    e.dur_s = to - from;
  }
  t.dropped = drop_shortest(t.events);
  std::map<std::pair<int64_t, int64_t>, int> depths;
  for (const auto& lane : lanes) depths[lane] = 1;
  for (const auto& e : t.events) depths[{e.rank, e.lane}] = std::max(depths[{e.rank, e.lane}], e.depth + 1);
  for (const auto& [lane, n] : depths) t.lanes.push_back({lane.first, lane.second, n});
  return t;
}

}  // namespace hpcrl::trace::report
