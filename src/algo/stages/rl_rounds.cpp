// Planning a disaggregated RL stage's rounds (rl_rounds.h).
#include "hpcrl/algo/stages/rl_rounds.h"

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
