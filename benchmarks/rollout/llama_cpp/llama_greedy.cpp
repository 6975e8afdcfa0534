// Greedy continuation of token-id prompts with llama.cpp (libllama's C API), for the
// correctness half of bench_vs_llama_cpp.sh. Built by the script against the libllama
// it built; not part of hpcrl's build.
//
//   llama_greedy MODEL.gguf PROMPTS.txt N_PREDICT THREADS [--kv f32|f16] [EOS_ID...]
//
// PROMPTS.txt: one prompt per line, token ids separated by spaces. For each prompt:
// clear the KV cache, decode the prompt in one batch, then N_PREDICT times take the
// argmax of the last logits (lowest id on a tie) and decode it; stop early at any
// EOS_ID given (kept, as hpcrl does; llama.cpp's own end-of-generation set is not
// used). --kv: the KV cache type (default f32, like hpcrl's cache; llama.cpp's own default
// is f16, whose rounding alone can flip a near-tie argmax). Prints one line of generated ids per prompt on stdout, and the batch-1 decode
// speed (tokens after the first / decode seconds) on stderr.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama_driver.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.txt N_PREDICT THREADS [--kv f32|f16] [EOS_ID...]\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], prompts_path = argv[2];
  const int n_predict = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  std::set<llama_token> eos;
  ggml_type kv_type = GGML_TYPE_F32;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kv" && i + 1 < argc) {
      const std::string t = argv[++i];
      kv_type = t == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
    } else {
      eos.insert(llama_token(std::atoi(argv[i])));
    }
  }

  const std::vector<std::vector<llama_token>> prompts = read_prompts(prompts_path);
  if (prompts.empty()) {
    std::fprintf(stderr, "%s: no prompts\n", prompts_path.c_str());
    return 2;
  }
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(longest + n_predict + 16);
  cp.n_batch = cp.n_ubatch = uint32_t(std::max<size_t>(longest, 32));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  cp.type_k = cp.type_v = kv_type;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }

  double decode_s = 0;
  long decode_tokens = 0;
  for (const auto& prompt : prompts) {
    llama_memory_clear(llama_get_memory(ctx), true);
    std::vector<llama_token> p = prompt;
    if (llama_decode(ctx, llama_batch_get_one(p.data(), int32_t(p.size()))) != 0) {
      std::fprintf(stderr, "llama_decode failed on the prompt\n");
      return 1;
    }
    std::vector<llama_token> out;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n_predict; ++i) {
      const float* logits = llama_get_logits_ith(ctx, -1);
      llama_token best = 0;
      for (int v = 1; v < n_vocab; ++v)
        if (logits[v] > logits[best]) best = v;
      out.push_back(best);
      if (eos.count(best) || i + 1 == n_predict) break;
      if (i == 0) t0 = std::chrono::steady_clock::now();  // time decode steps only, not the prefill
      llama_token t = best;
      if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) {
        std::fprintf(stderr, "llama_decode failed\n");
        return 1;
      }
      ++decode_tokens;
    }
    decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < out.size(); ++i) std::printf(i ? " %d" : "%d", out[i]);
    std::printf("\n");
  }
  std::fprintf(stderr, "llama_greedy: %ld decode tokens in %.3f s: %.1f tok/s (batch 1, %d threads)\n", decode_tokens,
               decode_s, decode_tokens / std::max(decode_s, 1e-9), threads);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
