// The GRPO-shaped workload with llama.cpp (libllama's C API), the way a user of
// llama.cpp would run it: for bench_vs_llama_cpp.sh, built by the script against
// the libllama it built; not part of hpcrl's build.
//
//   llama_batched MODEL.gguf PROMPTS.txt N THREADS LENGTHS [--kv f32|f16] [--seed S] [--greedy]
//
// PROMPTS.txt: one prompt per line, token ids separated by spaces. N samples per
// prompt. LENGTHS: one integer (every sample generates that many tokens) or a
// file with one integer per sample, prompt-major (a long-tail workload replays
// the response lengths another engine produced, so both do the same work).
//
// Each distinct prompt is prefilled once (one batch, all prompts, output at
// each last token) and its KV cells are shared with its other samples
// (llama_memory_seq_cp on a unified KV cache); then every step decodes one token
// for every sequence not yet at its length, and each sequence draws its token
// with its own sampler chain (temperature 1: llama.cpp's dist sampler over the
// whole vocabulary; --greedy: its greedy sampler). Prints one line on stdout:
//   tokens T prefill_s P decode_s D tok_s R
// with R = T / (P + D): generated tokens over prefill + decode + sampling time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama_driver.h"

namespace {

// One integer for all sequences, or a file of one integer per sequence.
std::vector<int> read_lengths(const std::string& arg, size_t sequences) {
  std::vector<int> lengths;
  std::ifstream in(arg);
  if (in) {
    int v;
    while (in >> v) lengths.push_back(v);
  } else {
    lengths.assign(sequences, std::atoi(arg.c_str()));
  }
  return lengths;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void add(llama_batch& b, llama_token token, llama_pos pos, llama_seq_id seq, bool output) {
  b.token[b.n_tokens] = token;
  b.pos[b.n_tokens] = pos;
  b.n_seq_id[b.n_tokens] = 1;
  b.seq_id[b.n_tokens][0] = seq;
  b.logits[b.n_tokens] = output;
  ++b.n_tokens;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.txt N THREADS LENGTHS [--kv f32|f16] [--seed S] [--greedy]\n",
                 argv[0]);
    return 2;
  }
  const std::string model_path = argv[1];
  const auto prompts = read_prompts(argv[2]);
  const int n = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  ggml_type kv_type = GGML_TYPE_F32;
  uint32_t seed = 1;
  bool greedy = false;
  for (int i = 6; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kv" && i + 1 < argc) kv_type = std::string(argv[++i]) == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
    else if (a == "--seed" && i + 1 < argc) seed = uint32_t(std::atoi(argv[++i]));
    else if (a == "--greedy") greedy = true;
    else {
      std::fprintf(stderr, "llama_batched: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const size_t P = prompts.size(), S = P * size_t(n);
  const std::vector<int> lengths = read_lengths(argv[5], S);
  if (P == 0 || n < 1 || lengths.size() != S) {
    std::fprintf(stderr, "llama_batched: %zu prompts, n %d, %zu lengths (want one per sample)\n", P, n, lengths.size());
    return 2;
  }
  size_t longest = 0, total_prompt = 0;
  for (const auto& p : prompts) {
    longest = std::max(longest, p.size());
    total_prompt += p.size();
  }
  const int max_len = *std::max_element(lengths.begin(), lengths.end());

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  // Unified cache: shared prompt cells once, plus every sample's own tokens.
  cp.n_ctx = uint32_t(total_prompt + S * size_t(max_len) + 256);
  cp.n_batch = uint32_t(std::max(total_prompt, S));
  cp.n_ubatch = 512;
  cp.n_seq_max = uint32_t(S);
  cp.kv_unified = true;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  cp.type_k = cp.type_v = kv_type;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  llama_memory_t mem = llama_get_memory(ctx);
  std::vector<llama_sampler*> samplers(S);
  for (size_t s = 0; s < S; ++s) {
    samplers[s] = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(samplers[s], greedy ? llama_sampler_init_greedy() : llama_sampler_init_dist(seed + uint32_t(s)));
  }
  llama_batch batch = llama_batch_init(int32_t(std::max(total_prompt, S)), 0, 1);

  // Prefill: every prompt once, as the sequence of its first sample.
  const auto t_prefill = std::chrono::steady_clock::now();
  std::vector<int32_t> last_index(P);
  for (size_t p = 0; p < P; ++p)
    for (size_t t = 0; t < prompts[p].size(); ++t) {
      if (t + 1 == prompts[p].size()) last_index[p] = batch.n_tokens;
      add(batch, prompts[p][t], llama_pos(t), llama_seq_id(p * n), t + 1 == prompts[p].size());
    }
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed on the prompts\n");
    return 1;
  }
  for (size_t p = 0; p < P; ++p)
    for (int i = 1; i < n; ++i) llama_memory_seq_cp(mem, llama_seq_id(p * n), llama_seq_id(p * n + i), -1, -1);
  std::vector<llama_token> last(S);
  std::vector<int> generated(S, 0);
  for (size_t s = 0; s < S; ++s) {
    last[s] = llama_sampler_sample(samplers[s], ctx, last_index[s / n]);
    generated[s] = 1;
  }
  const double prefill_s = seconds_since(t_prefill);

  // Decode: one token for every sequence short of its length.
  const auto t_decode = std::chrono::steady_clock::now();
  long tokens = long(S);
  std::vector<size_t> live;
  for (;;) {
    batch.n_tokens = 0;
    live.clear();
    for (size_t s = 0; s < S; ++s) {
      if (generated[s] >= lengths[s]) continue;
      live.push_back(s);
      add(batch, last[s], llama_pos(prompts[s / n].size() + generated[s] - 1), llama_seq_id(s), true);
    }
    if (live.empty()) break;
    if (llama_decode(ctx, batch) != 0) {
      std::fprintf(stderr, "llama_decode failed\n");
      return 1;
    }
    for (size_t i = 0; i < live.size(); ++i) {
      const size_t s = live[i];
      last[s] = llama_sampler_sample(samplers[s], ctx, int32_t(i));
      ++generated[s];
      ++tokens;
      if (generated[s] >= lengths[s]) llama_memory_seq_rm(mem, llama_seq_id(s), -1, -1);
    }
  }
  const double decode_s = seconds_since(t_decode);
  std::printf("tokens %ld prefill_s %.4f decode_s %.4f tok_s %.2f\n", tokens, prefill_s, decode_s,
              tokens / std::max(prefill_s + decode_s, 1e-9));
  llama_batch_free(batch);
  for (auto* s : samplers) llama_sampler_free(s);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
