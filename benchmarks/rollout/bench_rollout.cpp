// Generation throughput of the rollout engine on CPU, each number beside a
// baseline measured in the same run:
//   decode     tokens/s of the engine (preallocated slot cache) at batch 1, 8,
//              64, 256, against (a) recomputing the whole sequence every step
//              without a cache (quadratic; batch <= 8) and (b) decoding with the
//              model's own KvCache, which grows by concatenation every step —
//              the cost the slot cache removes.
//   bandwidth  weight bytes read per second at batch 1 (decode reads every
//              weight once per token) against the memory bandwidth of a large
//              tensor copy and a large reduction: the ceiling of batch-1 decode.
//   calls      the time of a generate call outside its prefill and decode
//              (packing the weights into the engine's copy, buffers) with the
//              engine kept from call to call and the weights changed between
//              calls, as in an RL run, against a new engine for every call.
//   batching   continuous vs static batching on a mixed-length workload: EOS
//              is a set of token ids, so with near-uniform random weights each
//              step ends a sequence with a fixed probability and response
//              lengths are geometric — a long tail, like RL rollouts.
// Random weights: throughput does not depend on what the weights say.
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/benchmarks/rollout/bench_rollout [--quick]
//       [--only decode|calls|batching]
// (PASSIVE: with the pthreads OpenBLAS, spinning OpenMP workers starve the BLAS
// threads; batch-8 decode measured 3.6x slower without it on this machine.)
#include <torch/utils.h>
#include <torch/version.h>
#include <ATen/CPUGeneratorImpl.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/rollout/engine.h"

namespace {

using namespace hpcrl;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes per second of a 256 MiB copy (read + write counted) and of a sum (read only); best of 5.
std::pair<double, double> memory_bandwidth() {
  const int64_t n = int64_t(256) << 18;  // floats
  at::Tensor src = at::rand({n}), dst = at::empty({n});
  dst.copy_(src);
  double copy = 1e30, read = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    dst.copy_(src);
    copy = std::min(copy, since(t0));
    t0 = Clock::now();
    volatile float s = src.sum().item<float>();
    (void)s;
    read = std::min(read, since(t0));
  }
  const double bytes = double(n) * 4;
  return {2 * bytes / copy, bytes / read};
}

ModelArch qwen25_05b_shaped() {
  ModelArch a;
  a.family = "qwen2";
  a.vocab_size = 151936;
  a.hidden_size = 896;
  a.intermediate_size = 4864;
  a.num_layers = 24;
  a.num_heads = 14;
  a.num_kv_heads = 2;
  a.head_dim = 64;
  a.max_position_embeddings = 32768;
  a.rope_theta = 1000000.0;
  a.tie_word_embeddings = true;
  a.attention_bias = true;
  return a;
}

std::vector<std::vector<int32_t>> prompts(int64_t count, int64_t length, int64_t vocab, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < count; ++i) {
    at::Tensor ids = at::randint(vocab, {length}, gen, at::kLong);
    out.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
  }
  return out;
}

rollout::SamplingParams greedy(int64_t max_new) {
  rollout::SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new;
  return p;
}

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct EngineDecode {
  double tokens_per_s = 0;
  double faults_per_token = 0;  // minor page faults of the whole generate call per generated token
};

// Decode tokens/s of the engine: decoded tokens over the time of its decode steps.
EngineDecode engine_decode(std::shared_ptr<model::DecoderModel> m, int64_t batch, int64_t prompt, int64_t new_tokens) {
  auto ps = prompts(batch, prompt, m->arch().vocab_size, 1);
  rollout::Engine engine(m, nullptr, {batch, true});
  engine.generate(ps, 1, greedy(2));  // warm-up
  const int64_t faults = minor_faults();
  engine.generate(ps, 1, greedy(new_tokens));
  const auto& st = engine.last_stats();
  return {double(st.generated_tokens - batch) / st.decode_seconds,
          double(minor_faults() - faults) / double(st.generated_tokens)};
}

// The model's own KvCache (concatenation), same prompts, no refill.
double concat_cache_decode(model::DecoderModel& m, int64_t batch, int64_t prompt, int64_t new_tokens) {
  torch::NoGradGuard no_grad;
  auto ps = prompts(batch, prompt, m.arch().vocab_size, 1);
  at::Tensor ids = at::empty({batch, prompt}, at::kLong);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < prompt; ++t) ids[b][t] = ps[b][t];
  model::KvCache cache = m.new_kv_cache();
  auto out = m.forward(ids, {}, {}, &cache);
  at::Tensor next = m.local_logits(out.hidden.narrow(1, prompt - 1, 1)).argmax(-1);  // [B, 1]
  auto t0 = Clock::now();
  for (int64_t s = 1; s < new_tokens; ++s) {
    out = m.forward(next, {}, {}, &cache);
    next = m.local_logits(out.hidden).argmax(-1);
  }
  return double(batch * (new_tokens - 1)) / since(t0);
}

// No cache: the whole sequence again for every token.
double recompute_decode(model::DecoderModel& m, int64_t batch, int64_t prompt, int64_t new_tokens) {
  torch::NoGradGuard no_grad;
  auto ps = prompts(batch, prompt, m.arch().vocab_size, 1);
  at::Tensor ids = at::empty({batch, prompt}, at::kLong);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < prompt; ++t) ids[b][t] = ps[b][t];
  auto t0 = Clock::now();
  for (int64_t s = 0; s < new_tokens; ++s) {
    auto out = m.forward(ids);
    at::Tensor next = m.local_logits(out.hidden.narrow(1, ids.size(1) - 1, 1)).argmax(-1);
    ids = at::cat({ids, next}, 1);
  }
  return double(batch * new_tokens) / since(t0);
}

struct Row {
  const char* name;
  ModelArch arch;
  std::vector<int64_t> batches;
  int64_t new_tokens;
  std::vector<int64_t> baseline_batches;  // recompute (batch <= 8) and concat baselines
  int64_t prompt = 16;
};

void decode_table(const std::vector<Row>& rows, double ceiling) {
  std::printf("\n## Decode tokens/s (greedy)\n\n");
  std::printf("| model | params | batch | prompt | new tokens | engine tok/s | model KvCache (concat) tok/s | "
              "no-cache recompute tok/s | engine / concat | engine / recompute | engine minor faults / token |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    model::ModelOptions o;
    o.seed = 1;
    auto m = std::make_shared<model::DecoderModel>(r.arch, parallel::ParallelContext{}, o);
    m->eval();
    int64_t weight_bytes = 0;
    for (auto& p : m->parameters()) weight_bytes += p.numel() * 4;
    for (int64_t b : r.batches) {
      const int64_t n = b >= 64 ? std::max<int64_t>(8, r.new_tokens / 2) : r.new_tokens;
      const EngineDecode decoded = engine_decode(m, b, r.prompt, n);
      const double eng = decoded.tokens_per_s;
      bool base = std::find(r.baseline_batches.begin(), r.baseline_batches.end(), b) != r.baseline_batches.end();
      double cat = base ? concat_cache_decode(*m, b, r.prompt, n) : 0;
      double rec = base && b <= 8 && r.prompt <= 16 ? recompute_decode(*m, b, r.prompt, n) : 0;
      auto cell = [](double v) { return v > 0 ? std::to_string(int64_t(v + 0.5)) : std::string("-"); };
      auto ratio = [](double a, double c) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2fx", a / c);
        return c > 0 ? std::string(buf) : std::string("-");
      };
      std::printf("| %s | %.1fM | %lld | %lld | %lld | %s | %s | %s | %s | %s | %.1f |\n", r.name,
                  r.arch.num_parameters() / 1e6, (long long)b, (long long)r.prompt, (long long)n, cell(eng).c_str(),
                  cell(cat).c_str(), cell(rec).c_str(), ratio(eng, cat).c_str(), ratio(eng, rec).c_str(),
                  decoded.faults_per_token);
      if (b == 1)
        std::printf("|   | batch-1 weight traffic: %.2f GB/s = %.0f%% of the %.2f GB/s ceiling | | | | | | | | | |\n",
                    eng * double(weight_bytes) / 1e9, 100.0 * eng * double(weight_bytes) / ceiling, ceiling / 1e9);
      std::fflush(stdout);
    }
  }
}

// Seconds of one generate call (1 prompt x 8 samples, 16 new tokens) and of
// what it spent outside prefill and decode.
struct CallTime {
  double whole = 0, outside = 0, decode = 0;
};
CallTime timed_call(rollout::Engine& engine, const std::vector<std::vector<int32_t>>& ps) {
  rollout::SamplingParams p;
  p.max_new_tokens = 16;
  p.seed = 5;
  const auto t0 = Clock::now();
  engine.generate(ps, 8, p);
  const double whole = since(t0);
  const auto& st = engine.last_stats();
  return {whole, whole - st.prefill_seconds - st.decode_seconds, st.decode_seconds};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void calls_table(const char* name, const ModelArch& arch, int rounds) {
  model::ModelOptions o;
  o.seed = 4;
  // Two models of the same weights: engines on one model share its packed copy,
  // so the new engines of the baseline generate with the other.
  auto kept_model = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  auto fresh_model = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  kept_model->eval();
  fresh_model->eval();
  auto ps = prompts(1, 32, arch.vocab_size, 9);
  rollout::Engine kept(kept_model, nullptr, {8, true});
  timed_call(kept, ps);  // the kept engine's first call, which allocates its packed copy
  std::vector<double> fresh_whole, fresh_outside, fresh_decode, kept_whole, kept_outside, kept_decode;
  for (int r = 0; r < rounds; ++r) {
    {  // an optimizer step: every call must pack new weights
      torch::NoGradGuard no_grad;
      for (auto* m : {kept_model.get(), fresh_model.get()})
        for (auto& w : m->parameters()) w.mul_(1.0001);
    }
    rollout::Engine fresh(fresh_model, nullptr, {8, true});
    const CallTime f = timed_call(fresh, ps), k = timed_call(kept, ps);
    fresh_whole.push_back(f.whole);
    fresh_outside.push_back(f.outside);
    fresh_decode.push_back(f.decode);
    kept_whole.push_back(k.whole);
    kept_outside.push_back(k.outside);
    kept_decode.push_back(k.decode);
  }
  std::printf("| %s | %.1fM | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2fx |\n", name,
              arch.num_parameters() / 1e6, median(fresh_whole), median(fresh_outside), median(fresh_decode),
              median(kept_whole), median(kept_outside), median(kept_decode),
              median(fresh_whole) / median(kept_whole));
  std::fflush(stdout);
}

void batching_table(int64_t sequences, int64_t max_batch) {
  ModelArch arch = model_arch_preset("small-25m");
  model::ModelOptions o;
  o.seed = 2;
  auto m = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  m->eval();
  rollout::SamplingParams p;
  p.temperature = 1.0;
  p.max_new_tokens = 160;
  p.seed = 3;
  for (int32_t id = 0; id < 8; ++id) p.eos_ids.push_back(id);  // ~8/272 per step: mean length ~34, long tail
  auto ps = prompts(sequences, 16, 256, 7);
  for (auto& q : ps)
    for (auto& id : q) id = 8 + id % 240;  // prompts free of EOS ids
  std::printf("\n## Continuous vs static batching (small-25m, %lld sequences, max_batch %lld, geometric lengths)\n\n",
              (long long)sequences, (long long)max_batch);
  std::printf("| batching | seconds | generated tokens | tokens/s | decode steps | mean live rows/step |\n"
              "|---|---|---|---|---|---|\n");
  double seconds[2];
  for (bool continuous : {false, true}) {
    rollout::Engine engine(m, nullptr, {max_batch, continuous});
    auto t0 = Clock::now();
    engine.generate(ps, 1, p);
    seconds[continuous] = since(t0);
    const auto& st = engine.last_stats();
    std::printf("| %s | %.2f | %lld | %.0f | %lld | %.1f |\n", continuous ? "continuous" : "static", seconds[continuous],
                (long long)st.generated_tokens, st.generated_tokens / seconds[continuous], (long long)st.decode_steps,
                double(st.generated_tokens - sequences) / double(std::max<int64_t>(1, st.decode_steps)));
    std::fflush(stdout);
  }
  std::printf("\ncontinuous / static speed-up: %.2fx\n", seconds[0] / seconds[1]);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;  // one section, or all
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_rollout [--quick] [--only decode|calls|batching]\n");
      return 2;
    }
  }
  const auto runs = [&](const char* section) { return only.empty() || only == section; };
  torch::manual_seed(0);
  auto [copy_bw, read_bw] = memory_bandwidth();
  const double ceiling = std::max(copy_bw, read_bw);
  std::printf("rollout benchmark: %d threads, LibTorch %s\n", at::get_num_threads(), TORCH_VERSION);
  std::printf("memory bandwidth: copy %.2f GB/s (read+write), sum %.2f GB/s (read): ceiling %.2f GB/s\n",
              copy_bw / 1e9, read_bw / 1e9, ceiling / 1e9);
  std::vector<Row> rows;
  if (quick) {
    rows.push_back({"small-25m", model_arch_preset("small-25m"), {1, 8}, 32, {1, 8}});
  } else {
    rows.push_back({"small-25m", model_arch_preset("small-25m"), {1, 8, 64, 256}, 64, {1, 8, 64}});
    rows.push_back({"small-25m", model_arch_preset("small-25m"), {16}, 32, {16}, 384});  // long context
    rows.push_back({"base-100m", model_arch_preset("base-100m"), {1, 8, 64}, 32, {1, 8}});
    rows.push_back({"qwen2.5-0.5b-shaped", qwen25_05b_shaped(), {1, 8, 64}, 12, {1}});
  }
  if (runs("decode")) decode_table(rows, ceiling);
  if (runs("calls")) {
    const int rounds = quick ? 3 : 5;
    std::printf("\n## Generate calls with new weights: a new engine per call vs one engine kept across calls "
                "(1 prompt x 8 samples, 16 new tokens, medians of %d interleaved rounds)\n\n", rounds);
    std::printf("| model | params | new engine: call s | outside prefill+decode s | decode s | kept engine: call s | "
                "outside prefill+decode s | decode s | new / kept |\n|---|---|---|---|---|---|---|---|---|\n");
    calls_table("small-25m", model_arch_preset("small-25m"), rounds);
    if (!quick) calls_table("qwen2.5-0.5b-shaped", qwen25_05b_shaped(), rounds);
  }
  if (runs("batching")) batching_table(quick ? 24 : 64, 8);
  return 0;
}
