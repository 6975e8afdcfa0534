// The baseline of the training benchmarks (bench_sft.sh, ../rl/bench_grpo.sh):
// the matmul throughput this machine reaches right now, with the thread count
// the measured run uses (OMP_NUM_THREADS). CPU throughput on a shared machine
// moves with the load, so the scripts run this just before and just after each
// training run and divide the run's model FLOP/s by it; for a 2-rank run they
// start two 1-thread copies at the same time and add their results, because
// that is the machine the ranks had.
//
// Prints one line: `gemm_square_flops F1 gemm_shape_flops F2 threads N`
//   F1: an n×n×n fp32 matmul (default n = 1024), the usual "peak" reference.
//   F2: an [m, k] x [k, n] matmul of the shape the model actually runs (e.g. the
//       MLP up-projection [tokens, hidden] x [hidden, ffn]); small models reach
//       much less than F1 on their own shapes.
// Each is the mean over a window of --seconds (default 2) after a warm-up, not a
// best-of: the training run it is compared with shares the cores with whatever
// else runs for its whole length, so the baseline must average over the same
// kind of load rather than catch a quiet moment.
//   OMP_NUM_THREADS=2 build/benchmarks/train/bench_gemm [--n 1024] [--shape M K N] [--seconds 2]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

// Mean FLOP/s of out = a[m,k] · b[k,n] (2·m·k·n FLOPs per call) over ≥ `window` seconds.
double matmul_flops(int64_t m, int64_t k, int64_t n, double window) {
  at::Tensor a = at::randn({m, k}), b = at::randn({k, n}), out = at::empty({m, n});
  at::mm_out(out, a, b);  // warm-up: allocation, page faults, thread-pool start
  int64_t calls = 0;
  double s = 0;
  auto t0 = Clock::now();
  do {
    at::mm_out(out, a, b);
    ++calls;
    s = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (s < window);
  return 2.0 * m * k * n * calls / s;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t sq = 1024, m = 0, k = 0, n = 0;
  double window = 2.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) {
      sq = std::stoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--shape") && i + 3 < argc) {
      m = std::stoll(argv[++i]);
      k = std::stoll(argv[++i]);
      n = std::stoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      window = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_gemm [--n N] [--shape M K N] [--seconds S]\n");
      return 2;
    }
  }
  at::manual_seed(0);
  const double square = matmul_flops(sq, sq, sq, window);
  const double shape = m > 0 ? matmul_flops(m, k, n, window) : 0.0;
  std::printf("gemm_square_flops %.6e gemm_shape_flops %.6e threads %d\n", square, shape, at::get_num_threads());
  return 0;
}
