// ModelArch: built-in presets, HF config.json parsing and writing (model_arch.h).
//
// The parser is deliberately strict about anything that changes the maths —
// an unsupported model_type, activation, rope scaling type, sliding window,
// dropout, biases we do not implement — because silently ignoring such a field
// would load weights into the wrong function. Keys that only matter to HF's
// Python side (architectures, use_cache, initializer_range, ...) are ignored;
// keys nobody here has heard of are logged as a warning, since new transformers
// versions add bookkeeping fields all the time.
#include "hpcrl/config/model_arch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"
#include "hpcrl/util/strings.h"

namespace hpcrl {
namespace {

using nlohmann::json;

// The built-in byte tokenizer (io::ByteTokenizer: 256 bytes + 7 specials, BOS
// 256, EOS 257) padded to a multiple of 16 rows, so vocab-parallel splits over
// tp ≤ 16 are even. `config` sits above `io`, hence the numbers, not the header.
constexpr int64_t kByteVocab = 272;
constexpr int64_t kByteBos = 256, kByteEos = 257;

const std::vector<std::string>& supported_families() {
  static const std::vector<std::string> f = {"llama", "qwen2", "qwen3", "qwen2_moe", "mixtral"};
  return f;
}

// Keys this parser reads, plus keys HF writes that do not change the function
// the weights compute.
const std::set<std::string>& known_keys() {
  static const std::set<std::string> k = {
      "architectures", "transformers_version", "initializer_range", "use_cache", "pretraining_tp",
      "_name_or_path", "pad_token_id", "max_window_layers", "use_mrope", "output_router_logits",
      "torch_dtype", "dtype", "auto_map", "return_dict", "output_hidden_states", "output_attentions",
      "tie_word_embeddings", "model_type", "bos_token_id", "eos_token_id", "sliding_window",
      "use_sliding_window", "layer_types", "attention_dropout", "hidden_act", "mlp_bias",
      "rope_scaling", "rope_parameters", "rope_theta", "head_dim", "attention_bias", "qkv_bias",
      "decoder_sparse_step", "mlp_only_layers", "router_jitter_noise", "num_local_experts",
      "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
      "norm_topk_prob", "router_aux_loss_coef", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
      "rms_norm_eps", "bos_token", "eos_token", "id2label", "label2id", "problem_type",
      "chunk_size_feed_forward", "is_encoder_decoder", "tokenizer_class", "finetuning_task",
      "hpcrl_tokenizer"};  // written by hpcrl for the byte tokenizer (config/model_tokenizer.h)
  return k;
}

// Reads typed fields of one config object, naming the file and key on errors.
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      HPCRL_CHECK_INPUT(fallback.has_value(), path_ << ": missing required field '" << key << "'");
      return *fallback;
    }
    const json& v = j_.at(key);
    std::optional<int64_t> value = as_int64(v);
    HPCRL_CHECK_INPUT(value.has_value(),
                      path_ << ": field '" << key << "' must be an integer between -2^63 and 2^63 (got " << v.dump() << ")");
    return *value;
  }
  // A JSON number as int64_t when it is a whole number in range. HF configs write some integers as
  // 4096.0; casting a double outside int64_t's range is undefined behaviour, so the range is checked
  // first (2^63 is exactly representable as a double; every double below it in magnitude converts).
  static std::optional<int64_t> as_int64(const json& v) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return int64_t(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (!v.is_number_float()) return std::nullopt;
    double d = v.get<double>();
    constexpr double two63 = 9223372036854775808.0;
    if (!(d >= -two63 && d < two63) || d != std::trunc(d)) return std::nullopt;  // also rejects NaN
    return int64_t(d);
  }
  int64_t positive(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    int64_t v = integer(key, fallback);
    HPCRL_CHECK_INPUT(v > 0, path_ << ": field '" << key << "' must be a positive integer (got " << v << ")");
    return v;
  }
  double number(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    HPCRL_CHECK_INPUT(v.is_number(), path_ << ": field '" << key << "' must be a number (got " << v.dump() << ")");
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    HPCRL_CHECK_INPUT(v.is_boolean(), path_ << ": field '" << key << "' must be true or false (got " << v.dump() << ")");
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    HPCRL_CHECK_INPUT(v.is_string(), path_ << ": field '" << key << "' must be a string (got " << v.dump() << ")");
    return v.get<std::string>();
  }
  // Fails naming the key when it is present with a value other than the one we implement.
  template <typename T>
  void require(const std::string& key, const T& supported, const std::string& why) const {
    if (!has(key)) return;
    bool ok = false;
    try {
      ok = j_.at(key).get<T>() == supported;
    } catch (const json::exception&) {
    }
    HPCRL_CHECK_INPUT(ok, path_ << ": unsupported " << key << " = " << j_.at(key).dump() << " (" << why << ")");
  }
  const json& at(const std::string& key) const { return j_.at(key); }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
};

void parse_rope(const Fields& f, ModelArch& a) {
  // transformers ≥ 5 nests rope_theta and the scaling parameters in rope_parameters.
  const json* scaling = nullptr;
  if (f.has("rope_parameters")) {
    const json& rp = f.at("rope_parameters");
    HPCRL_CHECK_INPUT(rp.is_object(), f.path() << ": rope_parameters must be an object");
    Fields r(rp, f.path() + ": rope_parameters");
    a.rope_theta = r.number("rope_theta", a.rope_theta);
    scaling = &rp;
  } else if (f.has("rope_scaling")) {
    scaling = &f.at("rope_scaling");
    HPCRL_CHECK_INPUT(scaling->is_object(), f.path() << ": rope_scaling must be an object or null");
  }
  if (!scaling) return;
  Fields s(*scaling, f.path() + ": rope_scaling");
  std::string type = s.string("rope_type", s.string("type", "default"));
  if (type == "default") return;
  HPCRL_CHECK_INPUT(type == "llama3", f.path() << ": unsupported rope_scaling type '" << type
                                              << "' (supported: llama3, or none)");
  a.rope_scaling.type = "llama3";
  a.rope_scaling.factor = s.number("factor", 8.0);
  a.rope_scaling.low_freq_factor = s.number("low_freq_factor", 1.0);
  a.rope_scaling.high_freq_factor = s.number("high_freq_factor", 4.0);
  a.rope_scaling.original_max_position_embeddings = s.positive("original_max_position_embeddings", 8192);
  HPCRL_CHECK_INPUT(a.rope_scaling.high_freq_factor > a.rope_scaling.low_freq_factor && a.rope_scaling.factor > 0,
                    f.path() << ": rope_scaling needs factor > 0 and high_freq_factor > low_freq_factor");
}

void parse_moe(const Fields& f, ModelArch& a) {
  if (a.family == "qwen2_moe") {
    a.num_experts = f.positive("num_experts");
    a.moe_intermediate_size = f.positive("moe_intermediate_size");
    a.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size", 0);
    a.norm_topk_prob = f.boolean("norm_topk_prob", false);
    f.require<int64_t>("decoder_sparse_step", 1, "every layer must be an MoE layer; set decoder_sparse_step to 1");
    if (f.has("mlp_only_layers"))
      HPCRL_CHECK_INPUT(f.at("mlp_only_layers").is_array() && f.at("mlp_only_layers").empty(),
                        f.path() << ": unsupported mlp_only_layers = " << f.at("mlp_only_layers").dump()
                                 << " (dense layers inside an MoE model are not supported; it must be [])");
  } else {  // mixtral
    a.num_experts = f.positive("num_local_experts");
    a.moe_intermediate_size = a.intermediate_size;
    a.norm_topk_prob = true;  // Mixtral always renormalises the top-k weights
    f.require<double>("router_jitter_noise", 0.0, "router jitter is a training-time noise hpcrl does not add; set 0");
  }
  a.experts_per_token = f.positive("num_experts_per_tok", 2);
  a.router_aux_loss_coef = f.number("router_aux_loss_coef", 0.001);
  HPCRL_CHECK_INPUT(a.experts_per_token <= a.num_experts,
                    f.path() << ": num_experts_per_tok " << a.experts_per_token << " exceeds the number of experts "
                             << a.num_experts);
}

void check_unsupported(const Fields& f, const ModelArch& a) {
  f.require<std::string>("hidden_act", "silu", "only SwiGLU MLPs (hidden_act \"silu\") are supported");
  f.require<double>("attention_dropout", 0.0, "hpcrl has no dropout; set attention_dropout to 0.0");
  f.require<bool>("mlp_bias", false, "MLP biases are not supported");
  HPCRL_CHECK_INPUT(!f.has("quantization_config"),
                    f.path() << ": quantized checkpoints (quantization_config) are not supported; use the "
                                "bf16/fp32 weights");
  if (a.family == "llama" || a.family == "qwen3")
    f.require<bool>("attention_bias", false, "attention biases on q/k/v/o are not supported for " + a.family);
  if (a.family == "mixtral") {
    HPCRL_CHECK_INPUT(!f.has("sliding_window"), f.path() << ": unsupported sliding_window = "
                                                         << f.at("sliding_window").dump()
                                                         << " (sliding-window attention is not implemented; "
                                                            "set it to null)");
  } else {
    f.require<bool>("use_sliding_window", false, "sliding-window attention is not implemented");
  }
  if (f.has("layer_types")) {
    const json& lt = f.at("layer_types");
    bool ok = lt.is_array() && std::all_of(lt.begin(), lt.end(), [](const json& t) {
      return t.is_string() && t.get<std::string>() == "full_attention";
    });
    HPCRL_CHECK_INPUT(ok, f.path() << ": unsupported layer_types (only \"full_attention\" layers are implemented)");
  }
}

void warn_unknown_keys(const json& j, const std::string& path) {
  std::vector<std::string> unknown;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known_keys().count(it.key())) unknown.push_back(it.key());
  if (!unknown.empty())
    spdlog::warn("{}: ignoring config keys hpcrl does not know: {}", path, str::join(unknown, ", "));
}

// The parameter count in Number: validate() counts in double to refuse a config whose count would
// overflow int64_t (signed overflow is undefined behaviour) before anything counts in int64_t.
template <class Number>
Number count_parameters(const ModelArch& m) {
  const Number C = Number(m.hidden_size), D = Number(m.head_dim);
  Number attn = C * m.num_heads * D + 2 * C * m.num_kv_heads * D + m.num_heads * D * C;
  if (m.attention_bias) attn += m.num_heads * D + 2 * m.num_kv_heads * D;
  if (m.qk_norm) attn += 2 * D;
  Number ffn = 0;
  if (m.num_experts > 0) {
    ffn = C * m.num_experts + 3 * C * m.num_experts * m.moe_intermediate_size;
    if (m.shared_expert_intermediate_size > 0) ffn += 3 * C * m.shared_expert_intermediate_size + C;
  } else {
    ffn = 3 * C * m.intermediate_size;
  }
  Number per_layer = attn + ffn + 2 * C;
  Number embed = m.vocab_size * C * (m.tie_word_embeddings ? 1 : 2);
  return embed + m.num_layers * per_layer + C;
}

// Values that parse but cannot run: each would surface as a NaN at step 0 or an index error in a kernel.
void check_ranges(const ModelArch& a, const std::string& where) {
  auto positive_finite = [&](double v, const char* key, const char* example) {
    HPCRL_CHECK_INPUT(std::isfinite(v) && v > 0,
                      where << ": " << key << " = " << v << " must be a positive finite number (e.g. " << example << ")");
  };
  positive_finite(a.rope_theta, "rope_theta", "10000 or 1000000");
  positive_finite(a.rms_norm_eps, "rms_norm_eps", "1e-6");
  HPCRL_CHECK_INPUT(a.rms_norm_eps < 1, where << ": rms_norm_eps = " << a.rms_norm_eps
                                              << " must be below 1 (it is added to a mean square; e.g. 1e-6)");
  HPCRL_CHECK_INPUT(std::isfinite(a.router_aux_loss_coef) && a.router_aux_loss_coef >= 0,
                    where << ": router_aux_loss_coef = " << a.router_aux_loss_coef << " must be ≥ 0 and finite");
  HPCRL_CHECK_INPUT(a.num_experts == 0 || a.moe_intermediate_size > 0,
                    where << ": moe_intermediate_size must be positive in an MoE model");
  HPCRL_CHECK_INPUT(a.shared_expert_intermediate_size >= 0,
                    where << ": shared_expert_intermediate_size = " << a.shared_expert_intermediate_size
                          << " must be ≥ 0 (0 = no shared expert)");
}

void validate(const ModelArch& a, const std::string& where) {
  // 2^50 parameters is ~1000x the largest published model; below it every partial count fits in int64_t.
  const double params = count_parameters<double>(a);
  HPCRL_CHECK_INPUT(params < 0x1p50, where << ": these sizes give " << params
                                         << " parameters, beyond the 2^50 hpcrl can count; check vocab_size, "
                                            "hidden_size, intermediate_size, num_hidden_layers and the expert sizes");
  HPCRL_CHECK_INPUT(a.num_heads % a.num_kv_heads == 0, where << ": num_attention_heads " << a.num_heads
                                                            << " is not a multiple of num_key_value_heads "
                                                            << a.num_kv_heads);
  HPCRL_CHECK_INPUT(a.head_dim % 2 == 0, where << ": head_dim " << a.head_dim << " must be even for RoPE");
  check_ranges(a, where);
}

ModelArch make_llama(int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers, int64_t heads, int64_t kv,
                     bool tied) {
  ModelArch a;
  a.family = "llama";
  a.vocab_size = vocab;
  a.hidden_size = hidden;
  a.intermediate_size = ffn;
  a.num_layers = layers;
  a.num_heads = heads;
  a.num_kv_heads = kv;
  a.head_dim = hidden / heads;
  a.max_position_embeddings = 2048;
  a.rope_theta = 10000.0;
  a.rms_norm_eps = 1e-5;
  a.tie_word_embeddings = tied;
  a.bos_token_id = kByteBos;
  a.eos_token_ids = {kByteEos};
  return a;
}

}  // namespace

ModelDims ModelArch::dims(int64_t seq_len) const {
  ModelDims d;
  d.heads = num_heads;
  d.kv_heads = num_kv_heads;
  d.layers = num_layers;
  d.experts = num_experts;
  d.seq_len = seq_len;
  d.vocab = vocab_size;
  d.hidden = hidden_size;
  d.intermediate = num_experts > 0 ? moe_intermediate_size : intermediate_size;
  return d;
}

int64_t ModelArch::num_parameters() const { return count_parameters<int64_t>(*this); }

ModelArch model_arch_preset(const std::string& name) {
  // Byte-vocabulary llama-family models for CPU runs. `tiny` is the quickstart
  // model (configs/quickstart.yaml: 4 layers, d=128); the 25M/100M/500M ones are for benchmarks
  // (large-500m: the memory ladder at the size of Qwen2.5-0.5B, docs/lora.md).
  if (name == "tiny") return make_llama(kByteVocab, 128, 384, 4, 4, 2, true);
  if (name == "tiny-2l") return make_llama(kByteVocab, 128, 384, 2, 4, 2, true);
  if (name == "small-25m") return make_llama(kByteVocab, 512, 1408, 8, 8, 4, true);
  if (name == "base-100m") return make_llama(kByteVocab, 768, 2048, 16, 12, 4, true);
  if (name == "large-500m") return make_llama(kByteVocab, 1280, 3584, 28, 16, 4, true);
  std::string hint = str::closest(name, model_arch_preset_names());
  throw InputError("unknown model preset '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                   "; presets: " + str::join(model_arch_preset_names(), ", "));
}

std::vector<std::string> model_arch_preset_names() { return {"tiny", "tiny-2l", "small-25m", "base-100m", "large-500m"}; }

ModelArch load_hf_config(const std::string& path) {
  std::string text = fs::read_file(path, "model config");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(path + ":" + json_errors::line_col(text, json_errors::offset(e, text)) +
                     ": invalid JSON in config.json (" + json_errors::problem(e) + ")");
  }
  HPCRL_CHECK_INPUT(j.is_object(), path << ": config.json must be a JSON object");
  Fields f(j, path);
  ModelArch a;
  HPCRL_CHECK_INPUT(f.has("model_type"), path << ": missing 'model_type' (supported: "
                                              << str::join(supported_families(), ", ") << ")");
  a.family = f.string("model_type", "");
  const auto& fams = supported_families();
  HPCRL_CHECK_INPUT(std::find(fams.begin(), fams.end(), a.family) != fams.end(),
                    path << ": unsupported model_type '" << a.family << "' (supported: " << str::join(fams, ", ")
                         << ")");
  const bool mixtral = a.family == "mixtral";
  a.vocab_size = f.positive("vocab_size");
  a.hidden_size = f.positive("hidden_size");
  a.intermediate_size = f.positive("intermediate_size");
  a.num_layers = f.positive("num_hidden_layers");
  a.num_heads = f.positive("num_attention_heads");
  a.num_kv_heads = f.positive("num_key_value_heads", a.num_heads);
  HPCRL_CHECK_INPUT(f.has("head_dim") || a.hidden_size % a.num_heads == 0,
                    path << ": hidden_size " << a.hidden_size << " is not divisible by num_attention_heads "
                         << a.num_heads << " and no head_dim is given");
  a.head_dim = f.positive("head_dim", a.hidden_size / a.num_heads);
  a.max_position_embeddings = f.positive("max_position_embeddings", mixtral ? 4096 * 32 : 2048);
  a.rope_theta = f.number("rope_theta", mixtral ? 1e6 : 10000.0);
  a.rms_norm_eps = f.number("rms_norm_eps", mixtral ? 1e-5 : 1e-6);
  a.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  a.attention_bias = a.family == "qwen2" || a.family == "qwen2_moe";
  a.qk_norm = a.family == "qwen3";
  parse_rope(f, a);
  check_unsupported(f, a);
  if (a.family == "qwen2_moe" || mixtral) parse_moe(f, a);
  if (f.has("bos_token_id")) a.bos_token_id = f.integer("bos_token_id");
  if (f.has("eos_token_id")) {
    const json& e = f.at("eos_token_id");
    HPCRL_CHECK_INPUT(e.is_number_integer() || e.is_array(),
                      path << ": eos_token_id must be an integer or a list of integers");
    if (e.is_number_integer()) {
      a.eos_token_ids.push_back(e.get<int64_t>());
    } else {
      for (const auto& x : e) {
        HPCRL_CHECK_INPUT(x.is_number_integer(), path << ": eos_token_id must be a list of integers");
        a.eos_token_ids.push_back(x.get<int64_t>());
      }
    }
  }
  a.torch_dtype = f.string("torch_dtype", f.string("dtype", "float32"));
  validate(a, path);
  warn_unknown_keys(j, path);
  return a;
}

std::string to_hf_config_json(const ModelArch& a) {
  static const std::map<std::string, std::string> arch_class = {{"llama", "LlamaForCausalLM"},
                                                                {"qwen2", "Qwen2ForCausalLM"},
                                                                {"qwen3", "Qwen3ForCausalLM"},
                                                                {"qwen2_moe", "Qwen2MoeForCausalLM"},
                                                                {"mixtral", "MixtralForCausalLM"}};
  auto it = arch_class.find(a.family);
  HPCRL_CHECK_INPUT(it != arch_class.end(), "cannot write config.json for model family '" << a.family << "'");
  json j;
  j["architectures"] = {it->second};
  j["model_type"] = a.family;
  j["vocab_size"] = a.vocab_size;
  j["hidden_size"] = a.hidden_size;
  j["intermediate_size"] = a.family == "mixtral" ? a.moe_intermediate_size : a.intermediate_size;
  j["num_hidden_layers"] = a.num_layers;
  j["num_attention_heads"] = a.num_heads;
  j["num_key_value_heads"] = a.num_kv_heads;
  j["head_dim"] = a.head_dim;
  j["max_position_embeddings"] = a.max_position_embeddings;
  j["rope_theta"] = a.rope_theta;
  if (a.rope_scaling.type == "llama3") {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", a.rope_scaling.factor},
                         {"low_freq_factor", a.rope_scaling.low_freq_factor},
                         {"high_freq_factor", a.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", a.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["rms_norm_eps"] = a.rms_norm_eps;
  j["tie_word_embeddings"] = a.tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["attention_dropout"] = 0.0;
  if (a.family == "llama" || a.family == "qwen3") j["attention_bias"] = false;
  if (a.family == "llama") j["mlp_bias"] = false;
  if (a.family == "qwen2" || a.family == "qwen3" || a.family == "qwen2_moe") j["use_sliding_window"] = false;
  if (a.family == "qwen2_moe") {
    j["num_experts"] = a.num_experts;
    j["moe_intermediate_size"] = a.moe_intermediate_size;
    j["shared_expert_intermediate_size"] = a.shared_expert_intermediate_size;
    j["norm_topk_prob"] = a.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = json::array();
  }
  if (a.family == "mixtral") {
    j["num_local_experts"] = a.num_experts;
    j["sliding_window"] = nullptr;
  }
  if (a.num_experts > 0) {
    j["num_experts_per_tok"] = a.experts_per_token;
    j["router_aux_loss_coef"] = a.router_aux_loss_coef;
  }
  if (a.bos_token_id >= 0) j["bos_token_id"] = a.bos_token_id;
  if (a.eos_token_ids.size() == 1) j["eos_token_id"] = a.eos_token_ids[0];
  if (a.eos_token_ids.size() > 1) j["eos_token_id"] = a.eos_token_ids;
  j["torch_dtype"] = a.torch_dtype;
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

}  // namespace hpcrl
