// The optimizer step's update on the CPU: adamw_update's fused pass against the same
// update as nine tensor ops (adamw_update_with_ops, what ran before and still runs off the
// CPU fast path), on one flat fp32 tensor of a model's parameter count, alternating the two
// so both see the same load. Prints the medians and their ratio.
//   OMP_NUM_THREADS=1 build/benchmarks/train/bench_adamw [--params 100000000] [--rounds 5]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hpcrl/optim/adamw.h"
#include "../bench_timing.h"

namespace {

using hpcrl::bench::Clock;
using hpcrl::bench::median;
using Update = void (*)(at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&, double, int64_t,
                        const hpcrl::optim::AdamWOptions&);

struct State {
  at::Tensor w, g, m, v;
  int64_t step = 0;
};

double seconds_of(Update update, State& s, const hpcrl::optim::AdamWOptions& o) {
  auto t0 = Clock::now();
  update(s.w, s.g, s.m, s.v, o.lr, ++s.step, o);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t params = 100'000'000, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--params") && i + 1 < argc) {
      params = std::stoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::stoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_adamw [--params N] [--rounds R]\n");
      return 2;
    }
  }
  const hpcrl::optim::AdamWOptions o{1e-4, 0.9, 0.95, 1e-8, 0.1};
  auto make = [&] { return State{at::randn({params}), at::randn({params}), at::zeros({params}), at::zeros({params})}; };
  State fused = make(), ops = make();
  seconds_of(hpcrl::optim::adamw_update, fused, o);  // warm-up: first touch of the moments
  seconds_of(hpcrl::optim::adamw_update_with_ops, ops, o);
  std::vector<double> t_fused, t_ops;
  for (int64_t r = 0; r < rounds; ++r) {
    t_ops.push_back(seconds_of(hpcrl::optim::adamw_update_with_ops, ops, o));
    t_fused.push_back(seconds_of(hpcrl::optim::adamw_update, fused, o));
  }
  const double f = median(t_fused), t = median(t_ops);
  std::printf("adamw_update params %lld threads %d: tensor ops %.3f s, fused %.3f s (%.2f GB/s at 28 B/param), "
              "fused %.2fx faster (medians of %lld)\n",
              static_cast<long long>(params), at::get_num_threads(), t, f, 28.0 * double(params) / f / 1e9, t / f,
              static_cast<long long>(rounds));
  return 0;
}
