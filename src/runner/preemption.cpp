// Signal-driven, collectively agreed stop (see preemption.h).
#include "hpcrl/runner/preemption.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace hpcrl::runner {
namespace {
std::atomic<int> g_stop{0};            // the first stop signal's number (or -1 for request_stop)
std::atomic<int64_t> g_arrival_ns{0};  // CLOCK_MONOTONIC at its arrival
// The arrival lines, formatted before any signal can come: a handler may only
// call async-signal-safe functions (write, clock_gettime), not printf or spdlog.
char g_line_usr1[256], g_line_term[256], g_line_int[256];

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_stop.compare_exchange_strong(expected, sig)) {
    if (sig == SIGINT) ::_exit(130);  // Ctrl-C twice: the user does not want to wait for the checkpoint
    return;                          // the first signal counts; later ones are noise
  }
  g_arrival_ns.store(monotonic_ns());
  const char* line = sig == SIGUSR1 ? g_line_usr1 : sig == SIGINT ? g_line_int : g_line_term;
  size_t n = 0;
  while (line[n]) ++n;
  ssize_t ignored = ::write(STDERR_FILENO, line, n);
  (void)ignored;
}

void format_line(char* buf, size_t size, int rank, const char* name) {
  std::snprintf(buf, size,
                "[rank %d] %s received: stopping at the next safe point (decode step, evaluation batch or step "
                "boundary), then checkpoint and exit 75\n",
                rank, name);
}
}  // namespace

void install_stop_handlers(int rank) {
  format_line(g_line_usr1, sizeof g_line_usr1, rank, "SIGUSR1");
  format_line(g_line_term, sizeof g_line_term, rank, "SIGTERM");
  format_line(g_line_int, sizeof g_line_int, rank, "SIGINT (press Ctrl-C again to end at once, without one)");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int launcher_rank() {
  for (const char* name : {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return 0;
}

bool stop_signalled() { return g_stop.load() != 0; }

void request_stop() {
  int expected = 0;
  if (g_stop.compare_exchange_strong(expected, -1)) g_arrival_ns.store(monotonic_ns());
}

std::string stop_signal_name() {
  const int s = g_stop.load();
  return s == SIGUSR1 ? "SIGUSR1" : s == SIGTERM ? "SIGTERM" : s == SIGINT ? "SIGINT" : s == -1 ? "a stop request" : "";
}

double seconds_since_stop_signal() {
  return stop_signalled() ? double(monotonic_ns() - g_arrival_ns.load()) * 1e-9 : 0.0;
}

bool stop_requested(const dist::CommPtr& world) {
  at::Tensor flag = at::full({1}, stop_signalled() ? 1 : 0, at::kInt);
  dist::all_reduce(world, flag, dist::ReduceOp::kMax);
  return flag.item<int>() != 0;
}

}  // namespace hpcrl::runner
