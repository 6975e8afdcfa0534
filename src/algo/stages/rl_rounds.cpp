// Planning a disaggregated RL stage's rounds (rl_rounds.h).
#include "hpcrl/algo/stages/rl_rounds.h"

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
// The generator's list: the first sync, then per iteration an optional sync, generate, send.
std::vector<RoundAction> generation_actions(int64_t start, int64_t end, int64_t k) {
  std::vector<RoundAction> g{{RoundStep::kSyncWeights, start}};
  for (int64_t i = start; i < end; ++i) {
    if (i >= start + k + 1) g.push_back({RoundStep::kSyncWeights, i});
    g.push_back({RoundStep::kGenerate, i});
    g.push_back({RoundStep::kSendSamples, i});
  }
  return g;
}
}  // namespace

RoundPlan plan_rounds(int64_t start, int64_t end, int64_t k) {
  HPCRL_CHECK(start <= end && k >= 0, "plan_rounds: start " << start << ", end " << end << ", staleness " << k);
  RoundPlan plan;
  plan.start = start;
  plan.generation = generation_actions(start, end, k);
  plan.training.push_back({RoundStep::kSyncWeights, start});
  plan.version.assign(size_t(end - start), start);
  int64_t received = start - 1;  // last iteration whose samples are in
  int64_t updated = start;       // updates done (the weight version)
  int64_t next_sync = start + k + 1;
  while (updated < end || next_sync < end) {
    if (next_sync < end && received >= next_sync - 1 && updated >= next_sync - k) {
      plan.training.push_back({RoundStep::kSyncWeights, next_sync});
      for (int64_t i = next_sync; i < end; ++i) plan.version[size_t(i - start)] = updated;
      ++next_sync;
    } else if (updated < end && updated <= received) {
      plan.training.push_back({RoundStep::kUpdate, updated++});
    } else if (received + 1 < end && received + 1 < next_sync) {
      plan.training.push_back({RoundStep::kReceiveSamples, ++received});
    } else {
      HPCRL_CHECK(false, "plan_rounds: no action possible at received " << received << ", updated " << updated
                                                                        << ", next sync " << next_sync);
    }
  }
  return plan;
}

std::vector<int64_t> RoundPlan::sync_versions() const {
  std::vector<int64_t> out;
  for (const auto& a : training)
    if (a.step == RoundStep::kSyncWeights)  // the first sync carries the start's weights, also in an empty plan
      out.push_back(a.iteration == start ? start : version[size_t(a.iteration - start)]);
  return out;
}

std::optional<RoundPlan> resume_plan(const RoundPlan& plan, int64_t iteration) {
  const RoundAction sync{RoundStep::kSyncWeights, iteration};
  const auto g = std::find(plan.generation.begin(), plan.generation.end(), sync);
  const auto t = std::find(plan.training.begin(), plan.training.end(), sync);
  if (g == plan.generation.end() || t == plan.training.end()) return std::nullopt;
  RoundPlan out = plan;
  out.generation.assign(g, plan.generation.end());
  out.training.assign(t, plan.training.end());
  return out;
}

std::string describe(const std::vector<RoundAction>& actions) {
  std::string out;
  for (const auto& a : actions) {
    if (!out.empty()) out += ' ';
    switch (a.step) {
      case RoundStep::kSyncWeights: out += 'S'; break;
      case RoundStep::kGenerate: out += 'G'; break;
      case RoundStep::kSendSamples: out += '>'; break;
      case RoundStep::kReceiveSamples: out += '<'; break;
      case RoundStep::kUpdate: out += 'U'; break;
    }
    out += std::to_string(a.iteration);
  }
  return out;
}

}  // namespace hpcrl::algo
