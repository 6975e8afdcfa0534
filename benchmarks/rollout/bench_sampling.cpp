// Choosing the next token of every live row, at the Qwen vocabulary
// (151,936), against the per-row sampler the engine used before, measured in
// the same run: for each row, copy the row to float, divide by the
// temperature, optional top-p sort, softmax and at::multinomial with the
// sequence's own generator, plus one log_softmax over the whole [R, V] logits
// for the log-probs. The batched path (rollout/sampling.h) filters, draws by
// inverse CDF at one Philox number per row and gathers the log-probs with one
// logsumexp, all on [R, V] at once.
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/benchmarks/rollout/bench_sampling [--quick]
#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "hpcrl/rollout/sampling.h"

namespace {

using namespace hpcrl;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The previous engine's choice for one step: per-row draws and a full log_softmax.
std::vector<int64_t> per_row_baseline(const at::Tensor& logits, double temperature, double top_p,
                                      std::vector<at::Generator>& gens) {
  at::Tensor logp = (logits.to(at::kFloat) / temperature).log_softmax(-1);
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < logits.size(0); ++r) {
    at::Tensor l = logits[r].to(at::kFloat).cpu() / temperature;
    if (top_p < 1.0) {
      auto [sorted, order] = l.sort(0, true);
      at::Tensor probs = sorted.softmax(0);
      at::Tensor drop = (probs.cumsum(0) - probs) >= top_p;
      l = l.index_fill(0, order.masked_select(drop), -std::numeric_limits<float>::infinity());
    }
    const int64_t tok = at::multinomial(l.softmax(0), 1, false, gens[r]).item<int64_t>();
    ids.push_back(tok);
    (void)logp[r][tok].item<float>();
  }
  return ids;
}

// Median seconds of `reps` calls of fn.
template <class Fn>
double median_seconds(int reps, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void sampling_table(const std::vector<int64_t>& batches, double top_p, int reps, int64_t V = 151936) {
  std::printf("\ntemperature 1.0, top_p %.2f, vocabulary %lld (median of %d steps)\n", top_p, (long long)V, reps);
  std::printf("| rows | per-row baseline ms/step | batched ms/step | speed-up |\n|---|---|---|---|\n");
  for (int64_t R : batches) {
    at::Tensor logits = at::randn({R, V}) * 3;
    std::vector<at::Generator> gens;
    for (int64_t r = 0; r < R; ++r) gens.push_back(at::make_generator<at::CPUGeneratorImpl>(uint64_t(r) + 1));
    std::vector<rollout::DrawKey> keys;
    for (int64_t r = 0; r < R; ++r) keys.push_back({r, 0, 0});
    const rollout::TokenFilter filter{1.0, 0, top_p, 0.0};
    int64_t step = 0;
    const double base = median_seconds(reps, [&] { per_row_baseline(logits, 1.0, top_p, gens); });
    const double batched = median_seconds(reps, [&] {
      for (auto& k : keys) k.step = step;
      ++step;
      rollout::ChosenTokens c = rollout::choose_tokens(logits, filter, rollout::draw_uniforms(1, keys), true);
      (void)c.ids.cpu();
    });
    std::printf("| %lld | %.2f | %.2f | %.2fx |\n", (long long)R, base * 1e3, batched * 1e3, base / batched);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  if (argc > 1 && !quick) {
    std::fprintf(stderr, "usage: bench_sampling [--quick]\n");
    return 2;
  }
  torch::manual_seed(0);
  std::printf("sampling benchmark: %d threads\n", at::get_num_threads());
  const std::vector<int64_t> batches = quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 8, 64, 128};
  sampling_table(batches, 1.0, quick ? 3 : 7);
  sampling_table(batches, 0.95, quick ? 3 : 5);
  // The quickstart's GRPO rollout: byte vocabulary (260), 32 prompts x 8 samples.
  sampling_table({256}, 1.0, quick ? 5 : 21, 260);
  return 0;
}
