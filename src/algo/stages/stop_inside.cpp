// Agreeing a stop inside long work (see stop_inside.h).
#include "hpcrl/algo/stages/stop_inside.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>

namespace hpcrl::algo {
namespace {
// `flag` OR-ed over `group` (unchanged without one).
bool any_over(const dist::CommPtr& group, bool flag) {
  if (!group || group->size() < 2) return flag;
  at::Tensor t = at::full({1}, flag ? 1 : 0, at::kInt);
  group->all_reduce(t, dist::ReduceOp::kMax);
  return t.item<int>() != 0;
}
}  // namespace

InsideStops::InsideStops(const StageEnv& env, const Role& role) {
  if (!env.stop_signalled || !env.world || role.mesh.size() != env.world->size()) return;
  signalled_ = env.stop_signalled;
  world_ = env.world;
}

std::function<bool()> InsideStops::engine_hook(const model::DecoderModel& model, const std::string& work) const {
  if (!enabled()) return nullptr;
  const auto& ctx = model.parallel_context();
  dist::CommPtr tp = ctx.tp;
  dist::CommPtr ep = model.arch().num_experts > 0 ? ctx.ep : nullptr;  // MoE layers step the ep group together
  const int rank = world_->rank();
  auto polls = std::make_shared<int64_t>(0);
  return [signalled = signalled_, tp, ep, rank, work, polls] {
    ++*polls;
    stop_point(work, rank);
    const bool stop = any_over(ep, any_over(tp, signalled()));
    // The step count since this engine was made: equal on ranks that step together.
    if (stop) spdlog::info("{}: generation abandoned at engine step {}", work, *polls);
    return stop;
  };
}

bool InsideStops::agreed() const { return enabled() && any_over(world_, signalled_()); }

void InsideStops::check(const std::string& where) const {
  if (!agreed()) return;
  spdlog::warn("stop agreed during {}: abandoning this step; the checkpoint holds the last complete one", where);
  throw StepAbandoned(where);
}

void InsideStops::between_batches(const std::string& work) const {
  if (!enabled()) return;
  stop_point(work, world_->rank());
  check(work);
}

namespace {
using Clock = std::chrono::steady_clock;
StopLatency g_latency;
Clock::time_point g_last_point = Clock::now();  // the process start counts as the first point
double g_lead = 0;
bool g_lead_warned = false;

void test_signal(const std::string& work, int world_rank) {
  static const char* spec = std::getenv("HPCRL_TEST_STOP_SIGNAL");
  if (!spec) return;
  const std::string s = spec;
  const size_t colon = s.find(':'), at = s.find('@');
  if (colon == std::string::npos || colon != work.size() || s.compare(0, colon, work) != 0) return;
  if (at != std::string::npos && std::stoi(s.substr(at + 1)) != world_rank) return;
  static std::map<std::string, int64_t> reached;  // points of each work seen so far (the main thread's)
  if (++reached[work] == std::stoll(s.substr(colon + 1, at == std::string::npos ? std::string::npos : at - colon - 1)))
    std::raise(SIGUSR1);
}

void warn_if_past_lead() {
  if (g_lead <= 0 || g_lead_warned || g_latency.bound_s() <= g_lead) return;
  g_lead_warned = true;
  spdlog::warn("a stop may take longer than the {:g} s the scheduler gives before the kill: {:.1f} s passed here "
               "without a stop check (ending at a {} check){}. Give the job a longer lead (sbatch "
               "--signal=USR1@SECONDS with --stop-lead SECONDS), shorten the steps (fewer prompts or tokens per "
               "iteration), or place the roles so that every rank generates (stops are then taken between decode "
               "steps)",
               g_lead, g_latency.longest_gap_s, g_latency.gap_ends_at,
               g_latency.longest_checkpoint_s > 0
                   ? fmt::format(" and a checkpoint takes {:.1f} s", g_latency.longest_checkpoint_s)
                   : std::string(" (no checkpoint measured yet)"));
}
}  // namespace

void stop_point(const std::string& work, int world_rank) {
  const auto now = Clock::now();
  const double gap = std::chrono::duration<double>(now - g_last_point).count();
  g_last_point = now;
  if (gap > g_latency.longest_gap_s) {
    g_latency.longest_gap_s = gap;
    g_latency.gap_ends_at = work;
    warn_if_past_lead();
  }
  test_signal(work, world_rank);
}

const StopLatency& stop_latency() { return g_latency; }

void set_stop_lead(double seconds) { g_lead = seconds; }

void checkpoint_took(double seconds) {
  g_latency.longest_checkpoint_s = std::max(g_latency.longest_checkpoint_s, seconds);
  warn_if_past_lead();
}

}  // namespace hpcrl::algo
