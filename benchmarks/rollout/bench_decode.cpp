// Decode speed of the rollout engine (rollout::Engine: the path of GRPO/PPO rollouts and
// `hpcrl generate`) on the model's device, against the device's own copy bandwidth measured
// in the same run. Greedy, with no EOS ids, so every sequence decodes exactly `new` tokens;
// random weights (speed does not depend on what the weights say).
//   build/benchmarks/rollout/bench_decode [--device cpu|cuda] [--quick] [--reps N]
//       [--qwen-new-tokens N] [--batches 1,8,64,256] [--no-qwen] [--qwen-config DIR]
//       [--steps dynamic,fixed,graphs]
// --steps: the engine's decode steps to measure each case with (EngineOptions::decode_step;
// default: dynamic on cpu, dynamic,graphs on cuda). With graphs the warm-up call is a whole call
// of the case: it captures the graphs (one per rows x keys bucket, at its second use; its
// captures and seconds are reported as warmup_*), and the measured calls replay them, as an RL
// run's iterations after its first do (the engine keeps them while the layout and weights hold).
// (run from the repository root: the Qwen shape is read from configs/models/qwen2.5-0.5b).
// Cases:
//   - the quickstart's policy (preset tiny, fp32) at its GRPO batch: 32 prompts x group 8,
//     16-token prompts, 48 new tokens, in the engine's default 64 slots and in one batch of 256;
//   - a Qwen2.5-0.5B-shaped model, fp32 at batch 1 and bf16 at each of --batches, 32-token
//     prompts, --qwen-new-tokens new tokens (128).
// Per case (best decode time of --reps calls after a 4-token warm-up call): decode steps, ms
// per decode step, decode tokens/s, prefill s, whole-call s, the weight bytes read per decode
// step over its time as a share of the measured copy bandwidth (read + write of a large fp32
// copy), host syncs, and on cuda the caching allocator's peak allocated bytes during the case;
// and from one more call, untimed, the operator calls the host dispatched (dispatch_counter.h:
// what bounds a small model's step on a GPU, and the same on any device for one code path) per
// decode step, in all prefills and in all host syncs (reading the tokens, retiring rows).
// Output: a Markdown table row and one `JSON {...}` line per case. --quick (a check that it runs,
// e.g. on CPU in CI, where bf16 matmuls are slow: a 32-token bf16 prefill took 26 s on 2 cores):
// 8 tiny prompts, 12 new tokens, 16 and 64 slots; Qwen prompts of 4 tokens, 4 new tokens, bf16 at
// batch 1; a 16 MiB copy.
#include <torch/utils.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#ifdef HPCRL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/rollout/dispatch_counter.h"
#include "hpcrl/rollout/engine.h"

namespace {

using namespace hpcrl;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::string device = "cpu";
  bool quick = false;
  int reps = 2;
  int64_t qwen_new_tokens = 128;
  std::vector<int64_t> batches = {1, 8, 64, 256};  // --quick without --batches: 1
  bool batches_given = false;
  bool qwen = true;
  std::string qwen_config = "configs/models/qwen2.5-0.5b";
  std::vector<rollout::DecodeStep> steps;  // empty: by device
};

const char* step_name(rollout::DecodeStep s) {
  switch (s) {
    case rollout::DecodeStep::dynamic: return "dynamic";
    case rollout::DecodeStep::fixed: return "fixed";
    case rollout::DecodeStep::graphs: return "graphs";
  }
  return "?";
}

struct Case {
  std::string name;
  int64_t prompts = 1, group = 1, slots = 1, prompt_len = 1, new_tokens = 1;
  rollout::DecodeStep step = rollout::DecodeStep::dynamic;
};

struct Measured {
  rollout::GenerateStats stats;  // of the call with the shortest decode time
  double call_s = 0;
  double peak_allocated_gb = -1;  // cuda only
  int64_t warmup_captures = 0;    // graphs captured by the warm-up call
  double warmup_call_s = 0;
  rollout::GenerateStats counted;  // a call under a DispatchCounter: its *_dispatches
};

// Bytes read + written per second by a copy of `elements` fp32 values on `dev`; best of 5. Reading
// one element back waits for the copy on a GPU.
double copy_bandwidth(const at::Device& dev, int64_t elements) {
  at::Tensor src = at::ones({elements}, at::TensorOptions().dtype(at::kFloat).device(dev));
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);
  dst[0].item<float>();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    dst.copy_(src);
    dst[0].item<float>();
    best = std::min(best, since(t0));
  }
  return 2.0 * double(elements) * 4.0 / best;
}

// The same prompts on every device and every run: ids from a xorshift sequence, above the
// three lowest ids (special tokens in the byte tokenizer).
std::vector<std::vector<int32_t>> make_prompts(int64_t count, int64_t length, int64_t vocab) {
  std::vector<std::vector<int32_t>> out(count);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& p : out) {
    for (int64_t t = 0; t < length; ++t) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      p.push_back(int32_t(3 + x % uint64_t(vocab - 3)));
    }
  }
  return out;
}

int64_t weight_bytes(model::DecoderModel& m) {
  int64_t bytes = 0;
  for (const auto& p : m.parameters()) bytes += p.numel() * int64_t(p.element_size());
  return bytes;
}

void reset_allocator_peak(bool cuda) {
#ifdef HPCRL_TORCH_CUDA
  if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
  (void)cuda;
}

double allocator_peak_gb(bool cuda) {
#ifdef HPCRL_TORCH_CUDA
  if (cuda) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
    return double(stats.allocated_bytes[0].peak) / 1e9;  // [0]: the aggregate over pool kinds
  }
#endif
  (void)cuda;
  return -1;
}

Measured measure(const std::shared_ptr<model::DecoderModel>& m, const Case& c, int reps, bool cuda) {
  const auto ps = make_prompts(c.prompts, c.prompt_len, m->arch().vocab_size);
  rollout::EngineOptions eo;
  eo.max_batch = c.slots;
  eo.decode_step = c.step;
  rollout::Engine engine(m, nullptr, eo);
  rollout::SamplingParams p;
  p.temperature = 0;  // greedy; no eos_ids: every sequence decodes all max_new_tokens
  // Allocates the slots and the kernels' workspaces; with graphs, the case itself (captures them).
  p.max_new_tokens = c.step == rollout::DecodeStep::graphs ? c.new_tokens : 4;
  const auto w0 = Clock::now();
  engine.generate(ps, c.group, p);
  const double warmup_s = since(w0);
  const int64_t warmup_captures = engine.last_stats().graph_captures;
  reset_allocator_peak(cuda);
  p.max_new_tokens = c.new_tokens;
  Measured best;
  best.stats.decode_seconds = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    engine.generate(ps, c.group, p);
    const double call_s = since(t0);
    if (engine.last_stats().decode_seconds < best.stats.decode_seconds) {
      best.stats = engine.last_stats();
      best.call_s = call_s;
    }
  }
  best.peak_allocated_gb = allocator_peak_gb(cuda);
  {
    const rollout::DispatchCounter counter;  // slows every call: counted apart from the timed calls
    engine.generate(ps, c.group, p);
  }
  best.counted = engine.last_stats();
  best.warmup_captures = warmup_captures;
  best.warmup_call_s = warmup_s;
  return best;
}

void print_case(model::DecoderModel& m, const char* dtype, const Case& c, const Measured& r, double copy_bw) {
  const auto& st = r.stats;
  const int64_t sequences = c.prompts * c.group;
  const double step_s = st.decode_seconds / double(std::max<int64_t>(1, st.decode_steps));
  // Each sequence's first token comes from its prefill; the rest from decode steps.
  const double decode_tok_s = double(st.generated_tokens - sequences) / std::max(1e-12, st.decode_seconds);
  const int64_t wb = weight_bytes(m);
  const double weight_bw = double(wb) / std::max(1e-12, step_s);
  const std::string peak = r.peak_allocated_gb < 0 ? "-" : std::to_string(r.peak_allocated_gb).substr(0, 5);
  const auto& n = r.counted;
  const double calls_per_step = double(n.decode_dispatches) / double(std::max<int64_t>(1, n.decode_steps));
  std::printf("| %s | %s | %s | %.1fM | %lld x %lld | %lld | %lld | %lld | %lld | %.3f | %.0f | %.3f | %.3f | %.1f | "
              "%.2f%% | %lld | %lld | %s | %.0f | %lld | %lld |\n",
              c.name.c_str(), dtype, step_name(c.step), double(m.arch().num_parameters()) / 1e6, (long long)c.prompts,
              (long long)c.group, (long long)c.slots, (long long)c.prompt_len, (long long)c.new_tokens,
              (long long)st.decode_steps, step_s * 1e3, decode_tok_s, st.prefill_seconds, r.call_s, weight_bw / 1e9,
              100.0 * weight_bw / copy_bw,
              (long long)st.host_syncs, (long long)(r.warmup_captures + st.graph_captures), peak.c_str(), calls_per_step,
              (long long)n.prefill_dispatches, (long long)n.sync_dispatches);
  std::printf("JSON {\"case\":\"%s\",\"dtype\":\"%s\",\"decode_step\":\"%s\",\"graph_captures\":%lld,"
              "\"graph_replays\":%lld,\"warmup_graph_captures\":%lld,\"warmup_call_s\":%.6f,\"params\":%lld,"
              "\"prompts\":%lld,\"group\":%lld,\"slots\":%lld,"
              "\"prompt_len\":%lld,\"new_tokens\":%lld,\"generated_tokens\":%lld,\"decode_steps\":%lld,"
              "\"decode_s\":%.6f,\"ms_per_decode_step\":%.4f,\"decode_tok_s\":%.1f,\"prefill_s\":%.6f,\"call_s\":%.6f,"
              "\"weight_bytes\":%lld,\"weight_bytes_per_s\":%.4g,\"copy_bytes_per_s\":%.4g,\"share_of_copy\":%.5f,"
              "\"host_syncs\":%lld,\"kv_cache_bytes\":%lld,\"peak_allocated_gb\":%s,\"dispatches_per_decode_step\":%.1f,"
              "\"prefill_dispatches\":%lld,\"sync_dispatches\":%lld,\"counted_prefill_forwards\":%lld}\n",
              c.name.c_str(), dtype, step_name(c.step), (long long)st.graph_captures, (long long)st.graph_replays,
              (long long)r.warmup_captures, r.warmup_call_s, (long long)m.arch().num_parameters(), (long long)c.prompts,
              (long long)c.group, (long long)c.slots, (long long)c.prompt_len, (long long)c.new_tokens,
              (long long)st.generated_tokens, (long long)st.decode_steps, st.decode_seconds, step_s * 1e3, decode_tok_s,
              st.prefill_seconds, r.call_s,
              (long long)wb, weight_bw, copy_bw, weight_bw / copy_bw, (long long)st.host_syncs,
              (long long)st.cache_bytes, r.peak_allocated_gb < 0 ? "null" : std::to_string(r.peak_allocated_gb).c_str(),
              calls_per_step, (long long)n.prefill_dispatches, (long long)n.sync_dispatches,
              (long long)n.prefill_forwards);
  std::fflush(stdout);
}

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_decode: %s\nusage: bench_decode [--device cpu|cuda] [--quick] [--reps N] [--qwen-new-tokens N] "
               "[--batches 1,8,64,256] [--no-qwen] [--qwen-config DIR] [--steps dynamic,fixed,graphs]\n",
               problem.c_str());
  std::exit(2);
}

int64_t positive(const char* flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1) usage(std::string(flag) + " expects an integer >= 1 (got '" + text + "')");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--device") {
      o.device = value();
      if (o.device != "cpu" && o.device != "cuda") usage("--device is cpu or cuda (got '" + o.device + "')");
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--reps") {
      o.reps = int(positive("--reps", value()));
    } else if (a == "--qwen-new-tokens") {
      o.qwen_new_tokens = positive("--qwen-new-tokens", value());
    } else if (a == "--batches") {
      o.batches.clear();
      o.batches_given = true;
      std::stringstream s(value());
      for (std::string b; std::getline(s, b, ',');) o.batches.push_back(positive("--batches", b));
    } else if (a == "--no-qwen") {
      o.qwen = false;
    } else if (a == "--qwen-config") {
      o.qwen_config = value();
    } else if (a == "--steps") {
      std::stringstream s(value());
      for (std::string w; std::getline(s, w, ',');) {
        if (w == "dynamic") o.steps.push_back(rollout::DecodeStep::dynamic);
        else if (w == "fixed") o.steps.push_back(rollout::DecodeStep::fixed);
        else if (w == "graphs") o.steps.push_back(rollout::DecodeStep::graphs);
        else usage("--steps lists dynamic, fixed or graphs (got '" + w + "')");
      }
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (o.quick && !o.batches_given) o.batches = {1};
  if (o.steps.empty()) {
    o.steps = {rollout::DecodeStep::dynamic};
    if (o.device == "cuda") o.steps.push_back(rollout::DecodeStep::graphs);
  }
  return o;
}

void run_quickstart_cases(const Options& o, const at::Device& dev, double copy_bw) {
  model::ModelOptions mo;
  mo.seed = 1;
  auto m = std::make_shared<model::DecoderModel>(model_arch_preset("tiny"), parallel::ParallelContext{}, mo);
  m->to(dev, at::kFloat);
  m->eval();
  const int64_t prompts = o.quick ? 8 : 32, new_tokens = o.quick ? 12 : 48;  // GRPO: 32 prompts x 8, 48 new
  const bool cuda = dev.is_cuda();
  // The engine's default 64 slots, and all sequences in one batch (--quick: 16 and 64 of its 64).
  for (int64_t slots : {o.quick ? int64_t(16) : int64_t(64), prompts * 8}) {
    for (rollout::DecodeStep step : o.steps) {
      const Case c{"quickstart tiny, GRPO batch, " + std::to_string(slots) + " slots", prompts, 8, slots, 16, new_tokens,
                   step};
      print_case(*m, "float32", c, measure(m, c, o.reps, cuda), copy_bw);
    }
  }
}

void run_qwen_cases(const Options& o, const at::Device& dev, double copy_bw) {
  const ModelArch arch = model::resolve_model_arch(o.qwen_config);
  model::ModelOptions mo;
  mo.seed = 2;
  const auto t0 = Clock::now();
  auto m = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, mo);
  m->eval();
  std::printf("(Qwen2.5-0.5B-shaped model from %s built on the host in %.1f s)\n", o.qwen_config.c_str(), since(t0));
  const int64_t new_tokens = o.quick ? std::min<int64_t>(4, o.qwen_new_tokens) : o.qwen_new_tokens;
  const int64_t prompt_len = o.quick ? 4 : 32;
  const bool cuda = dev.is_cuda();
  m->to(dev, at::kFloat);
  for (rollout::DecodeStep step : o.steps) {
    const Case fp32{"qwen2.5-0.5b-shaped, batch 1", 1, 1, 1, prompt_len, new_tokens, step};
    print_case(*m, "float32", fp32, measure(m, fp32, o.reps, cuda), copy_bw);
  }
  m->to(dev, at::kBFloat16);
  for (int64_t b : o.batches)
    for (rollout::DecodeStep step : o.steps) {
      const Case c{"qwen2.5-0.5b-shaped, batch " + std::to_string(b), b, 1, b, prompt_len, new_tokens, step};
      print_case(*m, "bfloat16", c, measure(m, c, o.reps, cuda), copy_bw);
    }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const bool cuda = o.device == "cuda";
#ifndef HPCRL_TORCH_CUDA
  if (cuda) usage("--device cuda, but this build's LibTorch has no CUDA (rebuild against a CUDA LibTorch)");
#endif
  const at::Device dev = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  torch::manual_seed(0);
  const int64_t copy_elements = o.quick ? (int64_t(1) << 22) : cuda ? (int64_t(1) << 28) : (int64_t(1) << 26);
  const double copy_bw = copy_bandwidth(dev, copy_elements);
  std::printf("bench_decode on %s: copy bandwidth %.1f GB/s (read + write of a %lld MiB fp32 copy, best of 5); "
              "%d host threads; best of %d calls per case\n",
              dev.str().c_str(), copy_bw / 1e9, (long long)(copy_elements * 4 >> 20), at::get_num_threads(), o.reps);
  std::printf("\n| case | dtype | step | params | prompts x group | slots | prompt | new | decode steps | "
              "ms/decode step | decode tok/s | prefill s | call s | weight GB/s at decode | of copy bw | host syncs | "
              "graphs | peak alloc GB | calls / decode step | prefill calls | sync calls |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  run_quickstart_cases(o, dev, copy_bw);
  if (o.qwen) run_qwen_cases(o, dev, copy_bw);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::printf("process peak resident set: %.2f GB\n", double(u.ru_maxrss) * 1024.0 / 1e9);
  return 0;
}
