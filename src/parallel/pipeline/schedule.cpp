// Pipeline schedule orders (schedule.h). Micro-batch and chunk numbering of
// the interleaved schedule follow Megatron-LM's get_model_chunk_id: the k-th
// forward of a rank works on local chunk (k mod pp·v) / pp for micro-batch
// (k / (pp·v))·pp + k mod pp, and backwards visit chunks in reverse.
#include "hpcrl/parallel/pipeline/schedule.h"

#include <algorithm>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::parallel::pipeline {

namespace {

const std::vector<std::string>& names() {
  static const std::vector<std::string> n{"gpipe", "1f1b", "interleaved_1f1b"};
  return n;
}

Action forward(int mb, int chunk) { return {Action::kForward, mb, chunk}; }
Action backward(int mb, int chunk) { return {Action::kBackward, mb, chunk}; }

// k-th forward (or backward) pass of `rank` in the interleaved order.
Action interleaved_pass(int k, bool is_forward, int pp, int rank, int v) {
  const int group = pp * v;
  int local = (k % group) / pp;
  if (!is_forward) local = v - 1 - local;
  const int mb = (k / group) * pp + k % pp;
  return {is_forward ? Action::kForward : Action::kBackward, mb, local * pp + rank};
}

}  // namespace

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::_1f1b: return "1f1b";
    case Schedule::interleaved: return "interleaved_1f1b";
  }
  return "?";
}

Schedule parse_schedule(const std::string& name) {
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "1f1b") return Schedule::_1f1b;
  if (name == "interleaved_1f1b" || name == "interleaved") return Schedule::interleaved;  // the YAML spells it "interleaved"
  const std::string hint = str::closest(name, names());
  throw InputError("unknown pipeline schedule '" + name + "'" +
                   (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; schedules: " + str::join(names(), ", "));
}

std::vector<Action> gpipe_actions(int m, int /*pp*/, int rank) {
  std::vector<Action> out;
  for (int i = 0; i < m; ++i) out.push_back(forward(i, rank));
  for (int i = 0; i < m; ++i) out.push_back(backward(i, rank));
  return out;
}

std::vector<Action> one_f_one_b_actions(int m, int pp, int rank) {
  const int warmup = std::min(pp - rank - 1, m);
  const int steady = m - warmup;
  std::vector<Action> out;
  for (int i = 0; i < warmup; ++i) out.push_back(forward(i, rank));
  for (int i = 0; i < steady; ++i) {
    out.push_back(forward(warmup + i, rank));
    out.push_back(backward(i, rank));
  }
  for (int i = steady; i < m; ++i) out.push_back(backward(i, rank));
  return out;
}

std::vector<Action> interleaved_actions(int m, int pp, int rank, int v) {
  const int total = m * v;
  // With m == pp there is no steady state to interleave: all forwards first.
  const int warmup = m == pp ? total : std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  const int steady = total - warmup;
  std::vector<Action> out;
  for (int k = 0; k < warmup; ++k) out.push_back(interleaved_pass(k, true, pp, rank, v));
  for (int k = 0; k < steady; ++k) {
    out.push_back(interleaved_pass(warmup + k, true, pp, rank, v));
    out.push_back(interleaved_pass(k, false, pp, rank, v));
  }
  for (int k = steady; k < total; ++k) out.push_back(interleaved_pass(k, false, pp, rank, v));
  return out;
}

std::vector<Action> schedule_actions(Schedule schedule, int m, int pp, int rank, int v) {
  HPCRL_CHECK_INPUT(m >= 1, "pipeline schedule: need at least one micro-batch, got " << m);
  HPCRL_CHECK(pp >= 1 && rank >= 0 && rank < pp, "pp rank " << rank << " of " << pp);
  if (schedule != Schedule::interleaved) {
    HPCRL_CHECK_INPUT(v == 1, "pipeline schedule " << schedule_name(schedule) << " runs one model chunk per rank, but "
                                                   << v << " virtual stages were asked for; use interleaved_1f1b "
                                                   << "or virtual stages 1");
    return schedule == Schedule::gpipe ? gpipe_actions(m, pp, rank) : one_f_one_b_actions(m, pp, rank);
  }
  HPCRL_CHECK_INPUT(v >= 1, "pipeline schedule interleaved_1f1b: virtual stages must be at least 1, got " << v);
  HPCRL_CHECK_INPUT(m % pp == 0, "pipeline schedule interleaved_1f1b needs the number of micro-batches to be a "
                                 "multiple of pp, got "
                                     << m << " micro-batches for pp=" << pp << "; use " << (m / pp + 1) * pp
                                     << " micro-batches, or the 1f1b schedule");
  return interleaved_actions(m, pp, rank, v);
}

std::vector<Action> forward_actions(Schedule schedule, int m, int pp, int rank, int v) {
  std::vector<Action> all = schedule_actions(schedule, m, pp, rank, v);
  std::vector<Action> out;
  for (const Action& a : all)
    if (a.kind == Action::kForward) out.push_back(a);
  return out;
}

double theoretical_bubble(Schedule schedule, int m, int pp, int v) {
  const int virt = schedule == Schedule::interleaved ? v : 1;
  return double(pp - 1) / double(virt * m + pp - 1);
}

}  // namespace hpcrl::parallel::pipeline
