// The architecture of a decoder model — everything needed to build it and to
// read/write its HF `config.json` — as a plain torch-free struct, so `validate`
// and `plan` know a role's dimensions without loading weights. Families: llama
// (incl. Llama-3 rope scaling), qwen2 (QKV bias), qwen3 (q/k norm), and MoE
// (qwen2_moe, mixtral). Built-in presets are tiny CPU models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/config/model_dims.h"

namespace hpcrl {

struct RopeScaling {
  std::string type;                  // "" (none) or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelArch {
  std::string family = "llama";      // HF model_type: llama | qwen2 | qwen3 | qwen2_moe | mixtral
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;     // dense FFN width
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;              // hidden_size / num_heads unless the config says otherwise
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;       // QKV bias (qwen2)
  bool qk_norm = false;              // RMSNorm on q and k per head (qwen3)
  // Mixture of experts (num_experts == 0: dense).
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = true;
  double router_aux_loss_coef = 0.0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype = "float32";

  ModelDims dims(int64_t seq_len = 0) const;
  int64_t num_parameters() const;    // total parameter count (tied embeddings counted once)
};

// Built-in presets ("tiny", "tiny-2l", ...); InputError listing the names on an unknown one.
ModelArch model_arch_preset(const std::string& name);
std::vector<std::string> model_arch_preset_names();

// Parses an HF config.json. InputError naming the file and the unsupported
// model_type/field (and what is supported) on anything it cannot honour.
ModelArch load_hf_config(const std::string& config_json_path);
// HF-compatible config.json text for `arch` (what hpcrl writes beside checkpoints).
std::string to_hf_config_json(const ModelArch& arch);

}  // namespace hpcrl
