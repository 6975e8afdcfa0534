// Writes a seeded random HF checkpoint (config.json + model.safetensors) of the
// architecture an HF config.json describes, with hpcrl's own model and writer:
// the input of bench_vs_llama_cpp.sh (both engines load the same weights).
//
//   hpcrl_random_checkpoint CONFIG.json OUT_DIR [--seed S]
//
// hpcrl's initialisation (N(0, 0.02²) matrices, unit norms, zero biases) makes a
// tied model repeat its last token: the token's own embedding dominates the
// residual stream. So, after DecoderModel's own init, every matrix other than the
// embedding / LM head is redrawn as N(0, 1/fan_in), biases as N(0, 0.1²) and norm
// weights as 1 + N(0, 0.1²): the layers then shape the logits, greedy decoding
// wanders over the vocabulary, and a wrong bias, norm or head layout shows up.
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/parallel_context.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG.json OUT_DIR [--seed S]\n", argv[0]);
    return 2;
  }
  const std::string config = argv[1], out = argv[2];
  uint64_t seed = 1;
  for (int i = 3; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  try {
    hpcrl::ModelArch arch = hpcrl::load_hf_config(config);
    hpcrl::model::ModelOptions opts;
    opts.seed = seed;
    opts.init = true;
    hpcrl::model::DecoderModel model(arch, hpcrl::parallel::ParallelContext{}, opts);
    torch::NoGradGuard no_grad;
    torch::manual_seed(seed + 1000);
    int64_t redrawn = 0, total = 0;
    for (auto& kv : model.named_parameters(true)) {
      at::Tensor p = kv.value();
      const std::string& name = kv.key();
      total += p.numel();
      const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
      if (is_bias) {
        p.normal_(0.0, 0.1);
      } else if (p.dim() == 1) {
        p.normal_(1.0, 0.1);
      } else if (p.dim() == 2 && p.size(0) != arch.vocab_size) {
        p.normal_(0.0, 1.0 / std::sqrt(double(p.size(1))));
      } else {
        continue;  // embedding / LM head keep hpcrl's N(0, 0.02²)
      }
      redrawn += p.numel();
    }
    hpcrl::model::save_pretrained(model, out, /*writer=*/true);
    std::printf("wrote %s: %lld parameters (%lld redrawn), seed %llu\n", out.c_str(), (long long)total,
                (long long)redrawn, (unsigned long long)seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpcrl_random_checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}
