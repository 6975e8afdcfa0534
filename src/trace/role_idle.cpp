// Busy and waiting shares per role of a disaggregated RL stage (see role_idle.h).
// Waits are matched to the rounds span of their rank and stage by time.
#include "hpcrl/trace/role_idle.h"

#include <map>
#include <set>

#include <algorithm>

namespace hpcrl::trace {
namespace {

struct Acc {
  std::set<int64_t> ranks;
  double rounds_us = 0, data_us = 0, weights_us = 0;
};

// "grpo/wait_samples" -> {"grpo", "wait_samples"}; {"", ""} without a '/'.
std::pair<std::string, std::string> split(const std::string& name) {
  const size_t at = name.find('/');
  if (at == std::string::npos) return {"", ""};
  return {name.substr(0, at), name.substr(at + 1)};
}
}  // namespace

std::vector<RoleIdleStats> role_idle(const std::vector<TraceFile>& files) {
  std::map<std::pair<std::string, std::string>, Acc> acc;  // (stage, role)
  for (const auto& f : files) {
    std::vector<const Event*> rounds, waits;
    for (const auto& e : f.events) {
      if (e.ph != "X") continue;
      const auto [stage, what] = split(e.name);
      if (what == "rounds") rounds.push_back(&e);
      else if (what == "wait_samples" || what == "weight_sync" || what == "wait_weights") waits.push_back(&e);
    }
    for (const Event* r : rounds) {
      const std::string stage = split(r->name).first;
      const char* role = arg_value(*r, "generates") != 0 ? "generation"
                         : arg_value(*r, "scores") != 0  ? "reference/critic"
                         : arg_value(*r, "rewards") != 0 ? "reward model"
                                                         : "trainer";
      Acc& a = acc[{stage, role}];
      a.ranks.insert(r->pid);
      a.rounds_us += r->dur_us;
      for (const Event* w : waits) {
        if (w->pid != r->pid || split(w->name).first != stage) continue;
        if (w->ts_us < r->ts_us || w->ts_us > r->ts_us + r->dur_us) continue;
        (split(w->name).second == "wait_samples" ? a.data_us : a.weights_us) += w->dur_us;
      }
    }
  }
  std::vector<RoleIdleStats> out;
  for (const auto& [key, a] : acc) {
    RoleIdleStats s;
    s.stage = key.first;
    s.role = key.second;
    s.ranks = static_cast<int>(a.ranks.size());
    s.seconds = a.rounds_us * 1e-6;
    const double total = a.rounds_us > 0 ? a.rounds_us : 1;
    s.waiting_data = a.data_us / total;
    s.waiting_weights = a.weights_us / total;
    s.busy = std::max(0.0, 1.0 - s.waiting_data - s.waiting_weights);
    out.push_back(s);
  }
  return out;
}

}  // namespace hpcrl::trace
