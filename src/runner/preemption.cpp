// Signal-driven, collectively agreed stop (see preemption.h).
#include "hpcrl/runner/preemption.h"

#include <ATen/ATen.h>

#include <atomic>
#include <csignal>

namespace hpcrl::runner {
namespace {
std::atomic<int> g_stop{0};
extern "C" void on_stop_signal(int) { g_stop.store(1); }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

bool stop_signalled() { return g_stop.load() != 0; }
void request_stop() { g_stop.store(1); }

bool stop_requested(const dist::CommPtr& world) {
  at::Tensor flag = at::full({1}, g_stop.load(), at::kInt);
  if (world && world->size() > 1) world->all_reduce(flag, dist::ReduceOp::kMax);
  return flag.item<int>() != 0;
}

}  // namespace hpcrl::runner
