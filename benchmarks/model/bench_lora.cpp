// What LoRA costs and saves on CPU, each a ratio against the plain model
// measured in the same run:
//   decode: a KV-cache decode step with the adapters applied unmerged (two
//     extra low-rank products per adapted projection) against the same model
//     with the adapters merged into its weights (what the rollout engine
//     computes with), and the one-off cost of that merge, in decode steps;
//   train: forward + backward of the LoRA model (the frozen base needs no
//     weight gradients) against full fine-tuning of the same model.
//   OMP_NUM_THREADS=2 build/benchmarks/model/bench_lora [--preset small-25m] [--rank 16] [--rows 8] [--steps 32]
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/slot_projections.h"

namespace {

using namespace hpcrl;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const model::LoraSpec spec_of(int64_t rank) {
  return {{rank, 2.0 * rank, 0.0}, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}};
}

// Seconds per decode step: `rows` sequences, a 32-token prompt, then `steps` tokens one at a time.
double decode_step(model::DecoderModel& m, int64_t rows, int64_t steps) {
  torch::NoGradGuard ng;
  m.eval();
  model::KvCache cache = m.new_kv_cache();
  at::Tensor ids = torch::randint(m.arch().vocab_size, {rows, 32}, torch::kLong);
  at::Tensor h = m.forward(ids, {}, {}, &cache).hidden;
  at::Tensor next = m.local_logits(h.narrow(1, -1, 1)).argmax(-1);
  auto t0 = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    h = m.forward(next, {}, {}, &cache).hidden;
    next = m.local_logits(h).argmax(-1);
  }
  return seconds_since(t0) / double(steps);
}

// Seconds per forward + backward of `rows` × 256 tokens (median of 3 after a warm-up).
double train_step(model::DecoderModel& m, int64_t rows) {
  m.train();
  at::Tensor ids = torch::randint(m.arch().vocab_size, {rows, 256}, torch::kLong);
  std::vector<double> t;
  for (int i = 0; i < 4; ++i) {
    m.zero_grad();
    auto t0 = Clock::now();
    m.token_logprobs(m.forward(ids).hidden, ids, false).logprobs.mean().backward();
    if (i > 0) t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "small-25m";
  int64_t rank = 16, rows = 8, steps = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preset")) preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rank")) rank = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows")) rows = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoll(argv[i + 1]);
    else return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
  }
  const ModelArch arch = model_arch_preset(preset);
  model::ModelOptions opts;
  opts.seed = 1;
  model::DecoderModel adapted(arch, {}, opts);
  model::attach_lora(adapted, spec_of(rank), 1);
  {  // non-zero factors, as after training
    torch::NoGradGuard ng;
    for (auto& p : adapted.named_parameters())
      if (parallel::tensor::is_lora_tensor(p.key())) p.value().normal_(0, 0.01);
  }
  // The engine's merge at the start of a generation call (unpacked: the merge alone).
  rollout::SlotProjections projections(adapted);
  projections.prepare(/*pack=*/false);
  auto t0 = Clock::now();
  projections.prepare(/*pack=*/false);
  const double merge_s = seconds_since(t0);
  std::map<std::string, at::Tensor> merged_weights;
  for (auto& [name, t] : model::gather_full_weights(adapted, model::AdapterView::merged)) merged_weights[name] = t;
  model::DecoderModel merged(arch, {}, opts);
  model::load_weights(merged, merged_weights, "merged");

  std::printf("%s, LoRA rank %lld on all 7 projections, %d threads\n\n", preset.c_str(), (long long)rank,
              at::get_num_threads());
  std::printf("| measure | adapters unmerged | merged / plain | ratio |\n|---|---:|---:|---:|\n");
  for (int64_t r : {int64_t(1), rows}) {
    // Interleaved, best of 3: the machine is shared.
    double u = 1e30, g = 1e30;
    for (int k = 0; k < 3; ++k) {
      u = std::min(u, decode_step(adapted, r, steps));
      g = std::min(g, decode_step(merged, r, steps));
    }
    std::printf("| decode step, %lld rows (ms) | %.2f | %.2f | %.2fx |\n", (long long)r, u * 1e3, g * 1e3, u / g);
    if (r == rows) std::printf("| merge once (ms; decode steps of %lld rows) | %.1f | | %.1f steps |\n", (long long)r,
                               merge_s * 1e3, merge_s / g);
  }
  double lora_t = train_step(adapted, 4);
  model::DecoderModel full(arch, {}, opts);
  double full_t = train_step(full, 4);
  std::printf("| train fwd+bwd, 4 x 256 tokens (s) | %.3f (LoRA) | %.3f (full) | %.2fx |\n", lora_t, full_t,
              lora_t / full_t);
  return 0;
}
