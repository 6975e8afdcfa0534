// Pipeline schedules as plain data: for one pp rank, the ordered list of
// forward and backward passes (micro-batch, model chunk) it runs in a step.
// The executor (executor.h) walks that list; communication follows from it
// (a forward of chunk c > 0 first receives its input, a backward of a chunk
// that is not the last first receives its output's gradient), so each
// schedule is a short function with nothing but the order in it.
//
//   gpipe             all forwards, then all backwards (GPipe). Holds m activations.
//   1f1b              warm-up forwards (pp - rank - 1), then one forward / one
//                     backward in turn, then the cool-down backwards
//                     (PipeDream-flush, Megatron's default). Holds ≤ pp activations.
//   interleaved_1f1b  1F1B over virtual stages: each rank holds v model chunks
//                     and works on groups of pp micro-batches chunk by chunk
//                     (Megatron's interleaved schedule). Needs m % pp == 0.
//
// Theoretical bubble (idle share of the step, equal forward/backward times
// per chunk and free communication): (p - 1) / (m + p - 1) for gpipe and
// 1f1b; (p - 1) / (v·m + p - 1) interleaved.
#pragma once

#include <string>
#include <vector>

#include "hpcrl/config/enums.h"

namespace hpcrl::parallel::pipeline {

// The one schedule enum: models.<role>.parallel.pp_schedule's (config/enums.h).
using Schedule = config::PpSchedule;

// "gpipe" | "1f1b" | "interleaved_1f1b" ("interleaved", the YAML's
// models.<role>.parallel.pp_schedule spelling, parses too). parse_schedule:
// InputError naming the choices (and the closest one) otherwise.
const char* schedule_name(Schedule s);
Schedule parse_schedule(const std::string& name);

struct Action {
  enum Kind { kForward, kBackward } kind;
  int microbatch;
  int chunk;  // global model chunk (rank + k·pp for the rank's k-th chunk)
  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
};

// The passes pp rank `rank` runs in one step of `microbatches` micro-batches,
// in order. virtual_stages: chunks per rank (1 unless interleaved).
// InputError when the schedule cannot take the counts: microbatches < 1,
// virtual_stages ≠ 1 for gpipe/1f1b, interleaved with m % pp ≠ 0.
std::vector<Action> schedule_actions(Schedule schedule, int microbatches, int pp, int rank, int virtual_stages = 1);

// The individual orders (arguments already validated by schedule_actions).
std::vector<Action> gpipe_actions(int microbatches, int pp, int rank);
std::vector<Action> one_f_one_b_actions(int microbatches, int pp, int rank);
std::vector<Action> interleaved_actions(int microbatches, int pp, int rank, int virtual_stages);

// Forward passes only, in the order the schedule's forwards run (forward-only pipelining).
std::vector<Action> forward_actions(Schedule schedule, int microbatches, int pp, int rank, int virtual_stages = 1);

// Idle share of a step in theory (see above).
double theoretical_bubble(Schedule schedule, int microbatches, int pp, int virtual_stages = 1);

}  // namespace hpcrl::parallel::pipeline
