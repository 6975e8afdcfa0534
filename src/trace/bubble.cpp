// Measured pipeline bubble per stage (see bubble.h). Passes are matched to
// steps by rank, lane and time: a pass belongs to the step whose interval
// contains its start, so several pipelined roles or stages in one trace never
// mix.
#include "hpcrl/trace/bubble.h"

#include <algorithm>
#include <map>
#include <set>

namespace hpcrl::trace {
namespace {

struct StageAcc {
  int64_t steps = 0;
  std::set<int64_t> ranks;
  double stages = 0, microbatches = 0, virtual_stages = 0, step_s = 0, measured = 0, theory = 0;
};

}  // namespace

std::vector<BubbleStats> pipeline_bubbles(const std::vector<TraceFile>& files) {
  // (rank, lane) -> step spans and pass spans, each sorted by start.
  std::map<std::pair<int64_t, int64_t>, std::vector<const Event*>> steps, passes;
  for (const auto& f : files)
    for (const auto& e : f.events) {
      if (e.ph != "X") continue;
      if (e.name == "pp/step") steps[{e.pid, e.tid}].push_back(&e);
      else if (e.name == "pp/forward" || e.name == "pp/backward") passes[{e.pid, e.tid}].push_back(&e);
    }
  auto by_start = [](const Event* a, const Event* b) { return a->ts_us < b->ts_us; };
  std::map<int64_t, StageAcc> stages;
  for (auto& [key, list] : steps) {
    std::sort(list.begin(), list.end(), by_start);
    auto& mine = passes[key];
    std::sort(mine.begin(), mine.end(), by_start);
    size_t p = 0;
    for (const Event* st : list) {
      const double end = st->ts_us + st->dur_us;
      while (p < mine.size() && mine[p]->ts_us < st->ts_us) ++p;  // passes outside any step
      double busy_us = 0;
      for (; p < mine.size() && mine[p]->ts_us < end; ++p) busy_us += mine[p]->dur_us;
      StageAcc& acc = stages[static_cast<int64_t>(arg_value(*st, "stage"))];
      ++acc.steps;
      acc.ranks.insert(key.first);
      acc.stages = std::max(acc.stages, arg_value(*st, "stages"));
      acc.microbatches = std::max(acc.microbatches, arg_value(*st, "microbatches"));
      acc.virtual_stages = std::max(acc.virtual_stages, arg_value(*st, "virtual_stages"));
      acc.step_s += st->dur_us * 1e-6;
      acc.measured += st->dur_us > 0 ? std::max(0.0, 1.0 - busy_us / st->dur_us) : 0.0;
      acc.theory += arg_value(*st, "theory");
    }
  }
  std::vector<BubbleStats> out;
  for (const auto& [stage, acc] : stages) {
    BubbleStats b;
    b.stage = stage;
    b.steps = acc.steps;
    b.ranks = static_cast<int>(acc.ranks.size());
    b.stages = acc.stages;
    b.microbatches = acc.microbatches;
    b.virtual_stages = acc.virtual_stages;
    const double n = static_cast<double>(acc.steps);
    b.mean_step_s = acc.step_s / n;
    b.measured = acc.measured / n;
    b.theory = acc.theory / n;
    out.push_back(b);
  }
  return out;
}

}  // namespace hpcrl::trace
