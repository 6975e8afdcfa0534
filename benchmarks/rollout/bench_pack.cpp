// Packing a model's weights into the engine's GEMM layout (PackedLinear::pack,
// the kernels' pack_panel), which the engine redoes for every generate call of
// an RL run (new weights each iteration) and for every layer of a ZeRO-3 model:
// its rate against (a) the blocked scalar transpose it replaced, kept here as
// the baseline and run on the same weights into the same layout (and checked
// to give the same bytes), and (b) a copy of as many bytes, the ceiling.
// Qwen2.5-0.5B's matrices (fused q/k/v, o, fused gate/up, down; the LM head);
// a model's time is the head plus 24 layers. Medians of 5 interleaved rounds.
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/benchmarks/rollout/bench_pack
#include <torch/utils.h>
#include <torch/version.h>
#include "hpcrl/parallel/host_threads.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "hpcrl/rollout/packed_linear.h"
#include "rollout/cpu_kernels.h"
#include "../bench_timing.h"

namespace {

using namespace hpcrl;
using hpcrl::bench::Clock;
using hpcrl::bench::median;
using hpcrl::bench::since;

// The packing loop before pack_panel: 16-deep blocks of a whole panel, one float
// at a time (a panel's P rows read at once).
void blocked_scalar_pack(const at::Tensor& w, int64_t P, float* out) {
  const int64_t N = w.size(0), K = w.size(1), panels = (N + P - 1) / P;
  const float* src0 = w.data_ptr<float>();
  constexpr int64_t kDepth = 16;
  parallel::host_parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
        const int64_t kn = std::min(kDepth, K - k0);
        float* dst = out + (p * K + k0) * P;
        for (int64_t c = 0; c < P; ++c) {
          const int64_t n = p * P + c;
          const float* src = n < N ? src0 + n * K + k0 : nullptr;
          for (int64_t k = 0; k < kn; ++k) dst[k * P + c] = src ? src[k] : 0.0f;
        }
      }
  });
}

struct Matrix {
  const char* name;
  int64_t rows, cols, count;  // count: how many the model has
};

struct Times {
  double pack = 0, baseline = 0, copy = 0;
};

Times time_matrix(const Matrix& m, int rounds) {
  const at::Tensor w = at::randn({m.rows, m.cols});
  const int64_t P = rollout::cpu::best_kernels().panel, panels = (m.rows + P - 1) / P;
  rollout::PackedLinear packed({w}, {});
  at::Tensor old = at::empty({panels * m.cols * P}), copy = at::empty_like(w);
  blocked_scalar_pack(w, P, old.data_ptr<float>());  // first touch of its memory, outside the timing
  copy.copy_(w);
  if (std::memcmp(old.data_ptr(), packed.storage(), old.numel() * sizeof(float)) != 0) {
    std::fprintf(stderr, "bench_pack: %s packed differently by pack_panel and the baseline\n", m.name);
    std::exit(1);
  }
  std::vector<double> pack, baseline, copies;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    packed.pack({w}, {});
    pack.push_back(since(t0));
    t0 = Clock::now();
    blocked_scalar_pack(w, P, old.data_ptr<float>());
    baseline.push_back(since(t0));
    t0 = Clock::now();
    copy.copy_(w);
    copies.push_back(since(t0));
  }
  return {median(pack), median(baseline), median(copies)};
}

}  // namespace

int main() {
  std::printf("pack benchmark: %d threads, LibTorch %s, kernels %s (panel %lld)\n\n", at::get_num_threads(),
              TORCH_VERSION, rollout::cpu::best_kernels().name, (long long)rollout::cpu::best_kernels().panel);
  const std::vector<Matrix> matrices = {{"q/k/v fused", 1152, 896, 24},    {"o", 896, 896, 24},
                                        {"gate/up fused", 9728, 896, 24}, {"down", 896, 4864, 24},
                                        {"LM head", 151936, 896, 1}};
  std::printf("| matrix | shape | pack_panel ms | GB/s | blocked scalar ms | GB/s | copy ms | GB/s | baseline / pack |\n"
              "|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
  Times model;
  for (const Matrix& m : matrices) {
    const Times t = time_matrix(m, 5);
    const double bytes = 2.0 * m.rows * m.cols * sizeof(float);  // read + write
    std::printf("| %s | %lld x %lld | %.2f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2fx |\n", m.name, (long long)m.rows,
                (long long)m.cols, 1e3 * t.pack, bytes / t.pack / 1e9, 1e3 * t.baseline, bytes / t.baseline / 1e9,
                1e3 * t.copy, bytes / t.copy / 1e9, t.baseline / t.pack);
    model.pack += m.count * t.pack;
    model.baseline += m.count * t.baseline;
    model.copy += m.count * t.copy;
    std::fflush(stdout);
  }
  std::printf("| whole model (Qwen2.5-0.5B shape) | | %.0f | | %.0f | | %.0f | | %.2fx |\n", 1e3 * model.pack,
              1e3 * model.baseline, 1e3 * model.copy, model.baseline / model.pack);
  return 0;
}
