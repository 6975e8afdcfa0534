// Tool-call time against decode time (tool_overlap.h).
#include "hpcrl/trace/tool_overlap.h"

#include <algorithm>
#include <utility>

namespace hpcrl::trace {

namespace {
using Interval = std::pair<double, double>;  // [start, end) in µs

// The part of [a, b) that the sorted, non-overlapping `steps` cover.
double covered(const std::vector<Interval>& steps, double a, double b) {
  // The first step that ends after a.
  auto it = std::upper_bound(steps.begin(), steps.end(), a,
                             [](double t, const Interval& s) { return t < s.second; });
  double us = 0;
  for (; it != steps.end() && it->first < b; ++it) us += std::min(b, it->second) - std::max(a, it->first);
  return us;
}
}  // namespace

std::optional<ToolOverlapStats> tool_overlap(const std::vector<TraceFile>& files) {
  ToolOverlapStats s;
  double hidden_us = 0, call_us = 0, decode_us = 0;
  for (const auto& f : files) {
    std::vector<Interval> decode, calls;
    for (const auto& e : f.events) {
      if (e.ph != "X") continue;
      if (e.name == "rollout/decode") decode.emplace_back(e.ts_us, e.ts_us + e.dur_us);
      else if (e.name == "rollout/tool") calls.emplace_back(e.ts_us, e.ts_us + e.dur_us);
    }
    for (const auto& [a, b] : decode) decode_us += b - a;
    if (calls.empty()) continue;
    ++s.ranks;
    std::sort(decode.begin(), decode.end());  // one lane: steps follow each other
    for (const auto& [a, b] : calls) {
      ++s.calls;
      call_us += b - a;
      hidden_us += covered(decode, a, b);
    }
  }
  if (s.calls == 0) return std::nullopt;
  s.call_s = call_us * 1e-6;
  s.decode_s = decode_us * 1e-6;
  s.hidden_share = call_us > 0 ? hidden_us / call_us : 0;
  return s;
}

}  // namespace hpcrl::trace
