// Records the multi-rank trace the trace tests check `summarize` against
// (tests/trace/data/). It is a miniature of a run's timing structure, measured
// with the real trace API and real clocks: an "sft" stage of 3 steps
// (forward / backward / optimizer + a gradient all-reduce) and a "grpo" stage of
// 2 iterations (rollout with a weight broadcast on a communication thread,
// reward, actor update with pipeline-lane micro-batches, backward, all-reduce).
// The work is real arithmetic; rank 1 does twice the backward work of rank 0, so
// the imbalance columns have something to show. A local memcpy of the stated
// byte count stands in for each collective (there is no MPI here).
//
//   trace_record DIR RANK [--killed-in-grpo]
// With --killed-in-grpo the process SIGKILLs itself in the middle of the second
// grpo iteration (what an OOM killer or Slurm timeout does): the file keeps what
// was flushed and has no closing ']'.
//
// Regenerate the committed data (from the repo root, after building trace_record).
// summary_test.cpp checks the recording shows what this program does (rank 1's
// backward imbalance near 4/3), so record without other processes preempting it:
// the committed files were made with `chrt -f 50` on a busy 2-core machine.
//   B="chrt -f 50 build/tests/trace/trace_record"; D=tests/trace/data
//   rm -rf $D/run2 $D/killed && $B $D/run2/trace 0 && $B $D/run2/trace 1
//   $B $D/killed/trace 0 && $B $D/killed/trace 1 --killed-in-grpo
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hpcrl/trace/trace.h"

namespace trace = hpcrl::trace;

namespace {

volatile double g_sink = 0;

// About 0.5 ms of floating-point work per unit on this class of machine.
void work(int units) {
  double x = 1.0;
  for (int i = 0; i < units * 200000; ++i) x = x * 1.0000001 + std::sqrt(static_cast<double>(i));
  g_sink = g_sink + x;
}

// Source and destination of the stand-in collectives, allocated and touched
// before tracing starts so the timed copies measure copying, not page faults.
std::vector<char> g_src, g_dst;

// Times a copy of `bytes` and records it as the collective `op` on `group`.
// The broadcast thread and the main thread use disjoint halves of the buffers.
void collective(const char* op, const char* group, size_t bytes, size_t offset) {
  double t0 = trace::now_us();
  std::memcpy(g_dst.data() + offset, g_src.data() + offset, bytes);
  trace::comm(op, group, static_cast<int64_t>(bytes), t0, trace::now_us() - t0);
  g_sink = g_sink + g_dst[offset + bytes / 2];
}

constexpr size_t kGradBytes = 1 << 20;    // gradient all-reduce
constexpr size_t kWeightBytes = 4 << 20;  // rollout weight broadcast

void sft(int rank) {
  trace::ScopedSpan stage("sft");
  for (int step = 0; step < 3; ++step) {
    trace::ScopedSpan s("sft/step", {{"step", step}, {"tokens", 64 * 48}});
    { trace::ScopedSpan f("sft/step/forward"); work(2); }
    { trace::ScopedSpan b("sft/step/backward"); work(4 * (1 + rank)); }
    collective("all_reduce", "policy/dp[0]", kGradBytes, 0);
    { trace::ScopedSpan o("sft/step/optimizer"); work(1); }
  }
}

void grpo(int rank, bool killed) {
  trace::ScopedSpan stage("grpo");
  for (int it = 0; it < 2; ++it) {
    {
      trace::ScopedSpan r("grpo/rollout", {{"step", it}, {"tokens", 16 * 8 * 48}});
      std::thread comm_thread([] {
        for (int k = 0; k < 2; ++k) collective("broadcast", "world", kWeightBytes, kGradBytes);
      });
      work(6);
      comm_thread.join();
    }
    { trace::ScopedSpan w("grpo/reward", {{"step", it}}); work(1); }
    trace::ScopedSpan u("grpo/actor_update", {{"step", it}});
    for (int mb = 0; mb < 2; ++mb) {
      trace::ScopedSpan p("grpo/actor_update/pp_forward", {{"micro_batch", mb}}, trace::pipeline_lane(0));
      work(1);
    }
    if (killed && it == 1) std::raise(SIGKILL);
    { trace::ScopedSpan b("grpo/actor_update/backward"); work(3 * (1 + rank)); }
    collective("all_reduce", "policy/dp[0]", kGradBytes, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: trace_record DIR RANK [--killed-in-grpo]\n");
    return 2;
  }
  bool killed = argc > 3 && std::string(argv[3]) == "--killed-in-grpo";
  g_src.assign(kGradBytes + kWeightBytes, 1);
  g_dst.assign(kGradBytes + kWeightBytes, 0);
  trace::Options options;
  options.flush_events = 16;  // small, so a killed run shows the periodic flushes
  trace::start(argv[1], std::atoi(argv[2]), options);
  sft(std::atoi(argv[2]));
  grpo(std::atoi(argv[2]), killed);
  trace::stop();
  return 0;
}
