// The report's observations, in the style of the HPC-R1 paper's findings: one
// sentence each, with its numbers and the span it comes from. Each kind needs
// its measured basis (a step span with phases inside it, two or more ranks
// that recorded a span, pp/step spans, <stage>/rounds spans, a collective
// inside a span) and a finding above its threshold (report.h):
//   kPhaseShareMin       a phase's share of its stage's iteration/step span
//   kRankExcessMin       a rank's total in a span above the mean of the ranks that recorded it
//   kBubbleExcessMin     the measured pipeline bubble above the schedule's theory (absolute)
//   kRoleWaitMin         a role's waiting share of its <stage>/rounds time
//   kCollectiveShareMin  a collective's share of the span it ran inside (time in flight:
//                        asynchronous calls that overlap are counted once)
//   kEstimateOffMin      with --estimate: a span's measured seconds off the cost model's
//                        prediction by that share (report_estimate.cpp, with the MFU of the
//                        longest training span and decode's memory-bandwidth share)
//   kMinWallShare        and each finding must concern that share of the traced time
//                        (Σ of the ranks' wall times; one rank's wall time for a rank's excess)
// They are ranked by the seconds they concern (summed over ranks, except a
// rank's excess, which is that rank's own), and the page keeps the largest
// kMaxObservations.
#include <algorithm>
#include <cmath>
#include <map>

#include "report_parts.h"

namespace hpcrl::trace {
namespace {

using report::percent_text;
using report::seconds_text;

// What a phase is called in a sentence; unknown spans go by their name alone.
std::string phase_words(const std::string& span) {
  static const std::map<std::string, std::string> words = {{"rollout", "generation"},
                                                           {"reward", "scoring"},
                                                           {"old_logprob", "recomputing the old log-probs"},
                                                           {"ref_logprob", "the reference's log-probs"},
                                                           {"advantage", "the advantages"},
                                                           {"actor_update", "the policy update"},
                                                           {"critic_update", "the critic update"},
                                                           {"values", "the critic's values"},
                                                           {"weight_sync", "the weight sync"},
                                                           {"forward_backward", "the forward and backward passes"},
                                                           {"optimizer", "the optimizer"},
                                                           {"grad_sync", "the gradient sync"},
                                                           {"teacher_forward", "the teacher's forward pass"},
                                                           {"student_update", "the student update"},
                                                           {"checkpoint", "checkpointing"}};
  size_t slash = span.rfind('/');
  auto it = words.find(slash == std::string::npos ? span : span.substr(slash + 1));
  return it == words.end() ? span : it->second + " (" + span + ")";
}

// "the GRPO iteration" for grpo/iteration, "the SFT step" for sft/step.
std::string step_words(const std::string& step_span) {
  static const std::map<std::string, std::string> stages = {
      {"sft", "SFT"}, {"grpo", "GRPO"}, {"ppo", "PPO"}, {"distill", "distillation"}};
  std::string stage = report::step_stage(step_span);
  auto it = stages.find(stage);
  std::string kind = step_span.substr(stage.size() + 1);
  return "the " + (it == stages.end() ? stage : it->second) + " " + kind;
}

std::string over_ranks(int ranks) {
  return ranks > 1 ? ", summed over " + std::to_string(ranks) + " ranks" : "";
}

int span_ranks(const Summary& s, const std::string& span) {
  for (const auto& st : s.spans)
    if (st.name == span) return st.ranks;
  return 0;
}

void phase_observations(const ReportData& d, std::vector<Observation>& out) {
  for (const auto& bar : d.shares) {
    if (!report::is_step_span(d.summary, bar.span) || bar.total_s <= 0) continue;
    for (const auto& [part, seconds] : bar.parts) {
      double share = seconds / bar.total_s;
      if (share < kPhaseShareMin || seconds < kMinWallShare * d.summary.rank_wall_sum_s) continue;
      std::string words = phase_words(part);
      // "the forward and backward passes are", "the teacher's forward pass is": a last word in -s but not -ss.
      const size_t paren = words != part ? words.rfind(" (") : std::string::npos;
      const bool plural = paren != std::string::npos && paren >= 2 && words[paren - 1] == 's' && words[paren - 2] != 's';
      out.push_back({words + (plural ? " are " : " is ") + percent_text(share) + " of " + step_words(bar.span) + " (" +
                         bar.span + "): " + seconds_text(seconds) + " of " + seconds_text(bar.total_s) +
                         over_ranks(span_ranks(d.summary, bar.span)),
                     part, seconds});
    }
  }
}

// True when `inner` ran inside `outer` in time, directly or further down
// (the share bars' tree: each part's bar is its time parent).
bool runs_inside(const ReportData& d, const std::string& inner, const std::string& outer) {
  std::map<std::string, std::string> parent;
  for (const auto& bar : d.shares)
    for (const auto& part : bar.parts) parent.emplace(part.first, bar.span);
  std::string at = inner;
  for (size_t hops = 0; hops < parent.size(); ++hops) {  // bounded: malformed nesting must not loop
    auto it = parent.find(at);
    if (it == parent.end()) return false;
    if (it->second == outer) return true;
    at = it->second;
  }
  return false;
}

// One rank's excess usually shows in a span and in every span around it
// (grad_sync/wait inside grpo/grad_sync, sft/step/backward inside sft): when
// the excesses agree within this fraction only the innermost span, the one
// that explains the rest, is an observation.
constexpr double kSameExcess = 0.10;

// A span's per-rank totals split by the ranks' roles (one group when colocated).
std::map<std::string, std::vector<std::pair<int64_t, double>>> by_role(const ReportData& d, const RankTotals& rt) {
  std::map<int64_t, std::string> role(d.rank_roles.begin(), d.rank_roles.end());
  std::map<std::string, std::vector<std::pair<int64_t, double>>> groups;
  for (const auto& r : rt.seconds) groups[role.count(r.first) ? role[r.first] : ""].push_back(r);
  return groups;
}

struct SlowRank {
  int64_t rank;
  Observation observation;
};

// The slowest of `ranks` when it is far enough above their mean in `span`.
void slowest_rank(const ReportData& d, const std::string& span, const std::vector<std::pair<int64_t, double>>& ranks,
                  const std::string& role, std::vector<SlowRank>& found) {
  if (ranks.size() < 2) return;
  double sum = 0;
  for (const auto& [rank, s] : ranks) sum += s;
  double mean = sum / static_cast<double>(ranks.size());
  auto slowest =
      std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  double excess_s = slowest->second - mean;
  if (mean <= 0 || slowest->second / mean - 1 < kRankExcessMin || excess_s < kMinWallShare * d.summary.wall_s) return;
  std::string of = role.empty() ? "the ranks" : "the " + role + " ranks";
  found.push_back({slowest->first,
                   {"rank " + std::to_string(slowest->first) + " spends " + percent_text(slowest->second / mean - 1) +
                        " longer in " + span + " than the mean of " + of + " (" + seconds_text(slowest->second) +
                        " against " + seconds_text(mean) + " over " + std::to_string(ranks.size()) + " ranks)",
                    span, excess_s}});
}

void rank_observations(const ReportData& d, std::vector<Observation>& out) {
  std::vector<SlowRank> found;
  for (const auto& rt : d.rank_totals)
    for (const auto& [role, ranks] : by_role(d, rt)) slowest_rank(d, rt.span, ranks, role, found);
  for (const auto& outer : found) {
    bool explained = std::any_of(found.begin(), found.end(), [&](const SlowRank& inner) {
      return inner.rank == outer.rank && runs_inside(d, inner.observation.span, outer.observation.span) &&
             std::abs(inner.observation.seconds - outer.observation.seconds) <= kSameExcess * outer.observation.seconds;
    });
    if (!explained) out.push_back(outer.observation);
  }
}

void bubble_observations(const ReportData& d, std::vector<Observation>& out) {
  for (const auto& b : d.summary.bubbles) {
    double idle_s = b.measured * b.mean_step_s * static_cast<double>(b.steps);
    if (b.measured - b.theory < kBubbleExcessMin || idle_s < kMinWallShare * d.summary.rank_wall_sum_s) continue;
    out.push_back({"the pipeline bubble of pp stage " + std::to_string(b.stage) + " is " + percent_text(b.measured) +
                       " against " + percent_text(b.theory) + " in theory (p = " + report::format("%.0f", b.stages) +
                       ", m = " + report::format("%.0f", b.microbatches) + "): " + seconds_text(idle_s) +
                       " idle in pp/step" + over_ranks(b.ranks),
                   "pp/step", idle_s});
  }
}

void role_observations(const ReportData& d, std::vector<Observation>& out) {
  for (const auto& r : d.summary.roles) {
    std::string who = r.role == "generation" ? "generation" : "the " + r.role;
    std::string data = r.role == "trainer" ? "samples" : r.role == "reward model" ? "scoring rounds" : "requests";
    struct Wait {
      double share;
      std::string what, span;
    };
    for (const Wait& w :
         {Wait{r.waiting_data, data, r.stage + "/wait_samples"},
          Wait{r.waiting_weights, "weights", r.stage + (r.role == "trainer" ? "/weight_sync" : "/wait_weights")}}) {
      double seconds = w.share * r.seconds;
      if (w.share < kRoleWaitMin || seconds < kMinWallShare * d.summary.rank_wall_sum_s) continue;
      out.push_back({who + " waits " + percent_text(w.share) + " of " + r.stage + "/rounds for " + w.what + " (" +
                         w.span + ": " + seconds_text(seconds) + " of " + seconds_text(r.seconds) +
                         over_ranks(r.ranks) + ")",
                     w.span, seconds});
    }
  }
}

void collective_observations(const ReportData& d, std::vector<Observation>& out) {
  for (const auto& c : d.comm_parents) {
    if (c.parent.empty() || c.parent_s <= 0) continue;
    double share = c.seconds / c.parent_s;
    if (share < kCollectiveShareMin || c.seconds < kMinWallShare * d.summary.rank_wall_sum_s) continue;
    std::string rate;  // bytes / summed call time, which overlapping calls make meaningless
    for (const auto& st : d.summary.comm)
      if (st.op == c.op && st.group == c.group && st.bytes > 0 && !c.overlapping)
        rate = ", " + report::rate_text(st.gbytes_per_s);
    // A blocking collective takes its time; asynchronous calls only overlap it.
    std::string verb = c.overlapping ? " is in flight (asynchronous calls) for " : " takes ";
    out.push_back({c.op + (c.group.empty() ? "" : " on " + c.group) + verb + percent_text(share) + " of " + c.parent +
                       " (" + seconds_text(c.seconds) + " of " + seconds_text(c.parent_s) + rate + ")",
                   c.parent, c.seconds});
  }
}

}  // namespace

std::vector<Observation> observe(const ReportData& d) {
  std::vector<Observation> out;
  phase_observations(d, out);
  rank_observations(d, out);
  bubble_observations(d, out);
  role_observations(d, out);
  collective_observations(d, out);
  report::estimate_observations(d, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Observation& a, const Observation& b) { return a.seconds > b.seconds; });
  if (out.size() > kMaxObservations) out.resize(kMaxObservations);
  return out;
}

}  // namespace hpcrl::trace
