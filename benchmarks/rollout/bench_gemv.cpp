// One decode row's projections over a whole model, as the engine computes a
// batch-1 step: the engine's GEMV (row_gemv: q/k/v in one call, gate/up in
// one, o, down, the tied LM head) against the path it replaced, kept here as
// the baseline on the same weights — at::mv (OpenBLAS) per matrix and a bias
// add — and a copy of 512 MiB (each byte read and written, both counted, as
// benchmarks/rollout/llama_cpp/memory_bandwidth.cpp) as the ceiling.
// Qwen2.5-0.5B's matrices (24 layers, d 896, 2 KV heads of 64, MLP 4864,
// vocabulary 151,936): 1.98 GB of float32 weights, each read once per token.
//
// Each path runs in a process of its own (this program started again with
// `mv` or `gemv`), 7 interleaved rounds, each the median of 5 tokens after a
// warm-up one: in one process OpenBLAS's threads, which spin after a call,
// would take the cores from the OpenMP threads of the next GEMV, and the
// reverse. The outputs of both paths are compared first (`check`).
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/benchmarks/rollout/bench_gemv
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/rollout/row_gemv.h"
#include "../bench_timing.h"

namespace {

using namespace hpcrl;
using hpcrl::bench::Clock;
using hpcrl::bench::median;
using hpcrl::bench::since;

struct Layer {
  at::Tensor q, k, v, qb, kb, vb, o, gate, up, down;
};

constexpr int64_t kLayers = 24, kWidth = 896, kKv = 128, kMlp = 4864, kVocab = 151936;

std::vector<Layer> random_layers() {
  std::vector<Layer> layers(kLayers);
  for (auto& l : layers) {
    l = {at::randn({kWidth, kWidth}), at::randn({kKv, kWidth}), at::randn({kKv, kWidth}), at::randn({kWidth}),
         at::randn({kKv}), at::randn({kKv}), at::randn({kWidth, kWidth}), at::randn({kMlp, kWidth}),
         at::randn({kMlp, kWidth}), at::randn({kWidth, kMlp})};
  }
  return layers;
}

// The replaced path: one at::mv per matrix (x fixed: only the weight traffic is measured).
at::Tensor token_with_mv(const std::vector<Layer>& layers, const at::Tensor& head, const at::Tensor& x,
                         const at::Tensor& xi, std::vector<at::Tensor>& keep) {
  keep.clear();
  for (const auto& l : layers) {
    keep.push_back(at::mv(l.q, x) + l.qb);
    keep.push_back(at::mv(l.k, x) + l.kb);
    keep.push_back(at::mv(l.v, x) + l.vb);
    keep.push_back(at::mv(l.o, x));
    keep.push_back(at::silu(at::mv(l.gate, x)) * at::mv(l.up, x));
    keep.push_back(at::mv(l.down, xi));
  }
  return at::mv(head, x);
}

at::Tensor token_with_row_gemv(const std::vector<Layer>& layers, const at::Tensor& head, const at::Tensor& x,
                               const at::Tensor& xi, std::vector<at::Tensor>& keep) {
  keep.clear();
  for (const auto& l : layers) {
    const at::Tensor qkv = rollout::row_gemv(x, {l.q, l.k, l.v}, {l.qb, l.kb, l.vb});
    keep.push_back(qkv.narrow(0, 0, kWidth));
    keep.push_back(qkv.narrow(0, kWidth, kKv));
    keep.push_back(qkv.narrow(0, kWidth + kKv, kKv));
    keep.push_back(rollout::row_gemv(x, {l.o}));
    const at::Tensor gate_up = rollout::row_gemv(x, {l.gate, l.up});
    keep.push_back(at::silu(gate_up.narrow(0, 0, kMlp)) * gate_up.narrow(0, kMlp, kMlp));
    keep.push_back(rollout::row_gemv(xi, {l.down}));
  }
  return rollout::row_gemv(x, {head});
}

double copy_gbps() {
  const size_t bytes = size_t(512) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    parallel::host_parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + bytes * b / 64, src.data() + bytes * b / 64, bytes * (e - b) / 64);
    });
    best = std::min(best, since(t0));
  }
  return 2.0 * double(bytes) / best / 1e9;
}

// Model weights from a fixed seed, the same in every process.
struct Model {
  std::vector<Layer> layers;
  at::Tensor head, x, xi;
  double bytes = 0;
};

Model make_model() {
  at::manual_seed(0);
  Model m;
  m.layers = random_layers();
  m.head = at::randn({kVocab, kWidth});
  m.x = at::randn({kWidth});
  m.xi = at::randn({kMlp});
  m.bytes = double(m.head.numel());
  for (const auto& l : m.layers)
    for (const at::Tensor* t : {&l.q, &l.k, &l.v, &l.qb, &l.kb, &l.vb, &l.o, &l.gate, &l.up, &l.down})
      m.bytes += double(t->numel());
  m.bytes *= 4;
  return m;
}

// `check`: the largest difference between the paths' outputs; `mv`/`gemv`: "seconds-per-token copy-GB/s".
int child(const std::string& what) {
  const Model m = make_model();
  std::vector<at::Tensor> a, b;
  if (what == "check") {
    const at::Tensor ya = token_with_mv(m.layers, m.head, m.x, m.xi, a);
    const at::Tensor yb = token_with_row_gemv(m.layers, m.head, m.x, m.xi, b);
    double worst = (ya - yb).abs().max().item<double>() / std::max(1.0, ya.abs().max().item<double>());
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / std::max(1.0, a[i].abs().max().item<double>()));
    std::printf("%.3g %.4g\n", worst, m.bytes);
    return 0;
  }
  auto token = what == "mv" ? token_with_mv : token_with_row_gemv;
  token(m.layers, m.head, m.x, m.xi, a);  // warm-up
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    token(m.layers, m.head, m.x, m.xi, a);
    t.push_back(since(t0));
  }
  std::printf("%.6f %.2f\n", median(t), copy_gbps());
  return 0;
}

std::string run_child(const char* self, const char* what) {
  const std::string cmd = std::string("'") + self + "' " + what;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char line[256] = {0};
  const bool ok = std::fgets(line, sizeof line, p) != nullptr;
  pclose(p);
  return ok ? line : "";
}

}  // namespace

int main(int argc, char** argv) {
  torch::NoGradGuard no_grad;
  if (argc > 1) return child(argv[1]);
  double worst = 0, bytes = 0;
  if (std::sscanf(run_child(argv[0], "check").c_str(), "%lf %lf", &worst, &bytes) != 2) return 1;
  std::printf("threads %d, %.2f GB of weights per token; largest difference between the paths %.3g (relative)\n",
              at::get_num_threads(), bytes / 1e9, worst);
  std::vector<double> mv, gemv, copy, share_mv, share_gemv;
  for (int round = 0; round < 7; ++round) {
    double t_mv, t_gemv, c_mv, c_gemv;
    if (std::sscanf(run_child(argv[0], "mv").c_str(), "%lf %lf", &t_mv, &c_mv) != 2 ||
        std::sscanf(run_child(argv[0], "gemv").c_str(), "%lf %lf", &t_gemv, &c_gemv) != 2)
      return 1;
    mv.push_back(t_mv);
    gemv.push_back(t_gemv);
    copy.push_back((c_mv + c_gemv) / 2);
    share_mv.push_back(bytes / t_mv / 1e9 / c_mv);
    share_gemv.push_back(bytes / t_gemv / 1e9 / c_gemv);
    std::printf("round %d: at::mv %.1f ms (copy %.1f GB/s), row_gemv %.1f ms (copy %.1f GB/s)\n", round + 1,
                t_mv * 1e3, c_mv, t_gemv * 1e3, c_gemv);
  }
  const double tm = median(mv), tg = median(gemv);
  std::printf("copy bandwidth %.1f GB/s (median)\n", median(copy));
  std::printf("at::mv per matrix: %.1f ms a token, %.1f GB/s; %.0f %% of its process's copy bandwidth (median)\n",
              tm * 1e3, bytes / tm / 1e9, 100 * median(share_mv));
  std::printf("row_gemv:          %.1f ms a token, %.1f GB/s; %.0f %% of its process's copy bandwidth (median)\n",
              tg * 1e3, bytes / tg / 1e9, 100 * median(share_gemv));
  std::printf("row_gemv / at::mv rate: %.2fx\n", tm / tg);
  return 0;
}
