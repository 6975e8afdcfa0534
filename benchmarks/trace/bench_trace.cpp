// What a trace span costs, so spans can stay in hot loops: per iteration, an
// empty loop (the baseline) against the same loop with a span that is disabled
// (literal name; std::string name or an Args list, which the caller builds
// before the enabled() branch) and enabled (writing a real trace file to a temp dir),
// plus a communicator event. Best of 5 repetitions each; everything is measured
// in this run and reported per iteration, above the baseline and as a ratio.
// The ratio uses this thread's CPU time (write() system time included), which
// a shared, oversubscribed machine inflates far less than wall time; wall time
// is shown beside it.
//
//   build/benchmarks/trace/bench_trace [iterations_disabled=20000000]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "hpcrl/trace/trace.h"

namespace trace = hpcrl::trace;

namespace {

inline void sink(long i) { asm volatile("" : : "r"(i) : "memory"); }

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct Cost {
  double cpu_ns = 1e30, wall_ns = 1e30;  // per iteration, best of 5
};

Cost ns_per_iter(long n, const std::function<void(long)>& loop) {
  Cost best;
  for (int rep = 0; rep < 5; ++rep) {
    double c0 = thread_cpu_ns();
    auto t0 = std::chrono::steady_clock::now();
    loop(n);
    double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    double cpu = thread_cpu_ns() - c0;
    best.cpu_ns = std::min(best.cpu_ns, cpu / static_cast<double>(n));
    best.wall_ns = std::min(best.wall_ns, wall / static_cast<double>(n));
  }
  return best;
}

void row(const char* what, Cost c, Cost base) {
  std::printf("| %-44s | %9.2f | %9.2f | %8.1fx | %9.2f |\n", what, c.cpu_ns, c.cpu_ns - base.cpu_ns,
              c.cpu_ns / base.cpu_ns, c.wall_ns);
}

}  // namespace

int main(int argc, char** argv) {
  long n_off = argc > 1 ? std::atol(argv[1]) : 20000000;
  long n_on = n_off / 1000;
  const std::string name = "grpo/actor_update/backward";  // 26 chars: past the small-string buffer

  auto baseline = [](long n) {
    for (long i = 0; i < n; ++i) sink(i);
  };
  auto off_literal = [](long n) {
    for (long i = 0; i < n; ++i) {
      trace::ScopedSpan s("grpo/actor_update/backward");
      sink(i);
    }
  };
  auto off_string = [&name](long n) {
    for (long i = 0; i < n; ++i) {
      trace::ScopedSpan s(name);
      sink(i);
    }
  };
  auto off_args = [](long n) {
    for (long i = 0; i < n; ++i) {
      trace::ScopedSpan s("grpo/actor_update/backward", {{"step", static_cast<double>(i)}});
      sink(i);
    }
  };
  auto on_literal = [](long n) {
    for (long i = 0; i < n; ++i) {
      trace::ScopedSpan s("grpo/actor_update/backward");
      sink(i);
    }
  };
  auto on_with_arg = [](long n) {
    for (long i = 0; i < n; ++i) {
      trace::ScopedSpan s("grpo/actor_update/backward");
      s.add_arg("step", static_cast<double>(i));
      sink(i);
    }
  };
  auto on_comm = [](long n) {
    for (long i = 0; i < n; ++i) {
      trace::comm("all_reduce", "policy/dp[0]", 1 << 20, trace::now_us(), 1.0);
      sink(i);
    }
  };

  Cost base_off = ns_per_iter(n_off, baseline);
  Cost d_lit = ns_per_iter(n_off, off_literal);
  Cost d_str = ns_per_iter(n_off, off_string);
  Cost d_args = ns_per_iter(n_off / 10, off_args);

  auto dir = std::filesystem::temp_directory_path() / "hpcrl_bench_trace";
  std::filesystem::remove_all(dir);
  trace::start(dir.string(), 0);
  // Each span ending at top level writes the file; nest inside one open span to
  // measure the buffered path (flush every 256 events), as inside a stage.
  Cost e_lit, e_arg, e_comm;
  {
    trace::ScopedSpan stage("bench");
    e_lit = ns_per_iter(n_on, on_literal);
    e_arg = ns_per_iter(n_on, on_with_arg);
    e_comm = ns_per_iter(n_on, on_comm);
  }
  Cost e_top = ns_per_iter(n_on / 10, on_literal);  // top-level: one write() per span
  trace::stop();
  auto bytes = std::filesystem::file_size(dir / "rank-00000.json");
  std::filesystem::remove_all(dir);
  Cost base_on = ns_per_iter(n_on, baseline);

  std::printf("trace span cost (best of 5; %ld iterations off, %ld on)\n\n", n_off, n_on);
  std::printf("| %-44s | %9s | %9s | %9s | %9s |\n", "loop body", "cpu ns", "+cpu ns", "ratio", "wall ns");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(), std::string(11, '-').c_str());
  row("empty (baseline)", base_off, base_off);
  row("disabled span, literal name", d_lit, base_off);
  row("disabled span, std::string name (26 chars)", d_str, base_off);
  row("disabled span, literal name + Args{step}", d_args, base_off);
  row("enabled span, nested (buffered)", e_lit, base_on);
  row("enabled span + add_arg, nested (buffered)", e_arg, base_on);
  row("enabled comm event", e_comm, base_on);
  row("enabled span, top level (write per span)", e_top, base_on);
  std::printf("\ntrace file written: %.1f MB\n", static_cast<double>(bytes) / 1e6);
  return 0;
}
