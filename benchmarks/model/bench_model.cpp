// Training-step throughput of the decoder on CPU: forward + backward of a
// preset (default base-100m, ~100M parameters) in fp32 and bf16, reported as
// tokens/s and model-FLOPs utilisation (MFU) — achieved model FLOP/s divided by
// the GEMM FLOP/s this machine reaches in the same run, with the same dtype and
// thread count. The ratio is the point: it says how much of the machine's
// matmul speed the model turns into training, independent of the CPU.
//
// Model FLOPs per token (PaLM appendix B): 6·N (N = non-embedding parameters,
// plus the LM head matmul) + 12·L·T·H·D for attention scores and values.
#include <torch/utils.h>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "hpcrl/model/decoder_model.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best-of-`reps` FLOP/s of an n×n×n matmul.
double gemm_flops(at::ScalarType dtype, int64_t n, int reps) {
  at::Tensor a = torch::randn({n, n}).to(dtype), b = torch::randn({n, n}).to(dtype);
  at::matmul(a, b);  // warm-up
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    at::Tensor c = at::matmul(a, b);
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * n * n * n / best;
}

struct StepResult {
  double seconds_per_step, tokens_per_s, flops_per_s;
};

StepResult train_steps(const hpcrl::ModelArch& arch, at::ScalarType dtype, int64_t batch, int64_t seq, int iters) {
  hpcrl::model::DecoderModel m(arch, hpcrl::parallel::ParallelContext{});
  m.to(dtype);
  m.train();
  at::Tensor ids = torch::randint(arch.vocab_size, {batch, seq}, torch::kLong);
  at::Tensor targets = torch::randint(arch.vocab_size, {batch, seq}, torch::kLong);
  auto step = [&] {
    m.zero_grad();
    auto out = m.forward(ids);
    at::Tensor loss = -m.token_logprobs(out.hidden, targets, /*with_entropy=*/false).logprobs.mean();
    loss.backward();
  };
  step();  // warm-up (allocations, first-touch)
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) step();
  double s = seconds_since(t0) / iters;
  const double C = arch.hidden_size, L = arch.num_layers, V = arch.vocab_size;
  const double non_embedding = arch.num_parameters() - V * C * (arch.tie_word_embeddings ? 1 : 2);
  const double per_token = 6.0 * (non_embedding + V * C) + 12.0 * L * seq * arch.num_heads * arch.head_dim;
  const double tokens = static_cast<double>(batch * seq);
  return {s, tokens / s, per_token * tokens / s};
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "base-100m";
  int64_t seq = 256, batch = 1;
  int iters = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preset")) preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--seq")) seq = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_model [--preset NAME] [--seq T] [--batch B] [--iters N]\n");
      return 2;
    }
  }
  hpcrl::ModelArch arch = hpcrl::model_arch_preset(preset);
  torch::manual_seed(0);
  std::printf("preset %s: %.1fM parameters, batch %lld x seq %lld, %d threads, LibTorch %s\n", preset.c_str(),
              arch.num_parameters() / 1e6, static_cast<long long>(batch), static_cast<long long>(seq),
              at::get_num_threads(), TORCH_VERSION);
  std::printf("| dtype | GEMM GFLOP/s (1024^3) | step s | tokens/s | model GFLOP/s | MFU vs GEMM |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    double gemm = gemm_flops(dtype, 1024, 3);
    StepResult r = train_steps(arch, dtype, batch, seq, iters);
    std::printf("| %s | %.1f | %.3f | %.1f | %.1f | %.1f%% |\n", dtype == at::kFloat ? "float32" : "bfloat16",
                gemm / 1e9, r.seconds_per_step, r.tokens_per_s, r.flops_per_s / 1e9, 100.0 * r.flops_per_s / gemm);
    std::fflush(stdout);
  }
  return 0;
}
