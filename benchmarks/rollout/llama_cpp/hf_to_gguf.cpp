// HF Qwen2 checkpoint (config.json + safetensors + tokenizer.json) -> GGUF v3 for llama.cpp.
// Torch-free and Python-free: the converter of bench_vs_llama_cpp.sh.
//
//   hf_to_gguf MODEL_DIR OUT.gguf [--type f32|f16] [--tokenizer DIR]
//
// What it writes follows llama.cpp's own convert_hf_to_gguf.py for Qwen2ForCausalLM
// (conversion/qwen.py, conversion/base.py: set_gguf_parameters, get_vocab_base,
// _set_vocab_gpt2, gguf-py SpecialVocab) and its loader (ggml/src/gguf.cpp,
// src/llama-arch.cpp, src/models/qwen2.cpp):
//   * header: "GGUF", version 3, tensor count, KV count (little-endian);
//   * KV: general.*, qwen2.* hyper-parameters, tokenizer.ggml.* (gpt2 BPE, pre "qwen2",
//     tokens padded to vocab_size with "[PADi]" (UNUSED), token types, merges "a b",
//     bos/eos/padding ids, add_bos_token);
//   * tensor infos: name, n_dims, dims in reverse order of the row-major shape, ggml type,
//     offset into the data section (each a multiple of 32);
//   * data section starting at a 32-byte aligned offset.
// --type f16 stores 2-D matrices as F16 and keeps norms and biases F32 (as convert does).
// Only dense Qwen2 (model_type "qwen2") is handled.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& m) { throw std::runtime_error(m); }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) fail("cannot open " + p.string());
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    fail(p.string() + ": " + e.what());
  }
}

// ---- safetensors (read-only mmap) ----
struct Mapped {
  void* base = nullptr;
  size_t size = 0;
  ~Mapped() {
    if (base) munmap(base, size);
  }
};

struct SrcTensor {
  std::string dtype;  // F32 | F16 | BF16
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

struct Safetensors {
  std::vector<std::unique_ptr<Mapped>> maps;
  std::map<std::string, SrcTensor> tensors;

  void open_file(const fs::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) fail("cannot open " + p.string());
    struct stat st {};
    fstat(fd, &st);
    auto m = std::make_unique<Mapped>();
    m->size = size_t(st.st_size);
    m->base = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m->base == MAP_FAILED) {
      m->base = nullptr;
      fail("cannot map " + p.string());
    }
    const uint8_t* b = static_cast<const uint8_t*>(m->base);
    if (m->size < 8) fail(p.string() + ": too short for safetensors");
    uint64_t n = 0;
    std::memcpy(&n, b, 8);
    if (8 + n > m->size) fail(p.string() + ": header runs past the end");
    json h = json::parse(std::string(reinterpret_cast<const char*>(b + 8), n));
    const uint8_t* data = b + 8 + n;
    const size_t data_size = m->size - 8 - n;
    for (auto& [name, e] : h.items()) {
      if (name == "__metadata__") continue;
      SrcTensor t;
      t.dtype = e.at("dtype").get<std::string>();
      t.shape = e.at("shape").get<std::vector<int64_t>>();
      const uint64_t begin = e.at("data_offsets")[0], end = e.at("data_offsets")[1];
      if (end < begin || end > data_size) fail(p.string() + ": tensor " + name + " out of range");
      t.data = data + begin;
      t.bytes = end - begin;
      tensors[name] = t;
    }
    maps.push_back(std::move(m));
  }

  explicit Safetensors(const fs::path& dir) {
    if (fs::exists(dir / "model.safetensors")) {
      open_file(dir / "model.safetensors");
    } else if (fs::exists(dir / "model.safetensors.index.json")) {
      json idx = read_json(dir / "model.safetensors.index.json");
      std::set<std::string> shards;
      for (auto& [k, v] : idx.at("weight_map").items()) shards.insert(v.get<std::string>());
      for (const auto& s : shards) open_file(dir / s);
    } else {
      fail(dir.string() + ": no model.safetensors or model.safetensors.index.json");
    }
  }
};

float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000 | (mant << 13);
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, with overflow to inf and gradual underflow (as numpy / ggml's F16 do).
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) return uint16_t(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));  // inf / nan
  if (absx >= 0x477ff000) return uint16_t(sign | 0x7c00);                                      // overflow
  if (absx < 0x38800000) {  // below the smallest normal half: subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;  // in units of 2^-24
    const uint32_t q = uint32_t(std::nearbyint(a));  // default rounding mode: nearest even
    return uint16_t(sign | q);
  }
  uint32_t mant = absx & 0x7fffff;
  int32_t exp = int32_t(absx >> 23) - 127 + 15;
  uint32_t h = (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into the exponent correctly
  return uint16_t(sign | h);
}

std::vector<float> to_f32(const SrcTensor& t, const std::string& name) {
  int64_t n = 1;
  for (auto d : t.shape) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  if (t.dtype == "F32") {
    if (t.bytes != size_t(n) * 4) fail(name + ": size mismatch");
    std::memcpy(out.data(), t.data, t.bytes);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    if (t.bytes != size_t(n) * 2) fail(name + ": size mismatch");
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[size_t(i)] = t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    fail(name + ": unsupported dtype " + t.dtype);
  }
  return out;
}

// ---- GGUF writer ----
enum GgufType : uint32_t {
  GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4, GGUF_INT32 = 5,
  GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
  GGUF_FLOAT64 = 12,
};
constexpr uint32_t GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1;
constexpr uint64_t kAlign = 32;  // GGUF_DEFAULT_ALIGNMENT

struct Buf {
  std::vector<uint8_t> b;
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

struct Gguf {
  Buf kv;
  uint64_t n_kv = 0;
  void key(const std::string& k, GgufType t) {
    kv.str(k);
    kv.pod<uint32_t>(t);
    ++n_kv;
  }
  void u32(const std::string& k, uint32_t v) { key(k, GGUF_UINT32), kv.pod(v); }
  void i32(const std::string& k, int32_t v) { key(k, GGUF_INT32), kv.pod(v); }
  void f32(const std::string& k, float v) { key(k, GGUF_FLOAT32), kv.pod(v); }
  void boolean(const std::string& k, bool v) { key(k, GGUF_BOOL), kv.pod<uint8_t>(v ? 1 : 0); }
  void str(const std::string& k, const std::string& v) { key(k, GGUF_STRING), kv.str(v); }
  void str_array(const std::string& k, const std::vector<std::string>& v) {
    key(k, GGUF_ARRAY);
    kv.pod<uint32_t>(GGUF_STRING);
    kv.pod<uint64_t>(v.size());
    for (const auto& s : v) kv.str(s);
  }
  void i32_array(const std::string& k, const std::vector<int32_t>& v) {
    key(k, GGUF_ARRAY);
    kv.pod<uint32_t>(GGUF_INT32);
    kv.pod<uint64_t>(v.size());
    for (auto x : v) kv.pod(x);
  }
};

struct OutTensor {
  std::string name, src;
  std::vector<int64_t> shape;  // row-major (HF) shape
  uint32_t type;
  uint64_t offset = 0, bytes = 0;
};

uint64_t pad(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string hf_to_gguf_name(const std::string& n) {
  static const std::regex layer(R"(^model\.layers\.(\d+)\.(.+)$)");
  static const std::map<std::string, std::string> per_layer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (n == "model.embed_tokens.weight") return "token_embd.weight";
  if (n == "model.norm.weight") return "output_norm.weight";
  if (n == "lm_head.weight") return "output.weight";
  std::smatch m;
  if (std::regex_match(n, m, layer)) {
    auto it = per_layer.find(m[2].str());
    if (it != per_layer.end()) return "blk." + m[1].str() + "." + it->second;
  }
  return "";
}

int token_id_of(const json& tok_json, const json& value) {
  // tokenizer_config's "eos_token" is a string or {"content": ...}.
  std::string content;
  if (value.is_string()) content = value.get<std::string>();
  else if (value.is_object() && value.contains("content")) content = value["content"].get<std::string>();
  else return -1;
  for (const auto& a : tok_json.value("added_tokens", json::array()))
    if (a.at("content").get<std::string>() == content) return a.at("id").get<int>();
  const auto& vocab = tok_json.at("model").at("vocab");
  if (vocab.contains(content)) return vocab[content].get<int>();
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR OUT.gguf [--type f32|f16] [--tokenizer DIR]\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1], out_path = argv[2];
  std::string type = "f32";
  fs::path tok_dir = dir;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--type") type = argv[i + 1];
    else if (a == "--tokenizer") tok_dir = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (type != "f32" && type != "f16") {
    std::fprintf(stderr, "--type must be f32 or f16\n");
    return 2;
  }
  try {
    const json cfg = read_json(dir / "config.json");
    const std::string model_type = cfg.value("model_type", "");
    if (model_type != "qwen2") fail("only model_type qwen2 is supported, got '" + model_type + "'");
    const int64_t vocab_size = cfg.at("vocab_size"), hidden = cfg.at("hidden_size"),
                  layers = cfg.at("num_hidden_layers"), heads = cfg.at("num_attention_heads"),
                  ffn = cfg.at("intermediate_size");
    const int64_t kv_heads = cfg.value("num_key_value_heads", heads);
    const int64_t ctx = cfg.value("max_position_embeddings", int64_t(32768));
    const double theta = cfg.value("rope_theta", 10000.0), eps = cfg.value("rms_norm_eps", 1e-6);
    const bool tied = cfg.value("tie_word_embeddings", false);
    const int64_t head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null() ? cfg["head_dim"].get<int64_t>()
                                                                                      : hidden / heads;

    Gguf g;
    g.str("general.architecture", "qwen2");
    g.str("general.type", "model");
    g.str("general.name", dir.filename().string().empty() ? "model" : dir.filename().string());
    g.u32("qwen2.block_count", uint32_t(layers));
    g.u32("qwen2.context_length", uint32_t(ctx));
    g.u32("qwen2.embedding_length", uint32_t(hidden));
    g.u32("qwen2.feed_forward_length", uint32_t(ffn));
    g.u32("qwen2.attention.head_count", uint32_t(heads));
    g.u32("qwen2.attention.head_count_kv", uint32_t(kv_heads));
    if (head_dim != hidden / heads) {
      g.u32("qwen2.attention.key_length", uint32_t(head_dim));
      g.u32("qwen2.attention.value_length", uint32_t(head_dim));
    }
    g.f32("qwen2.rope.freq_base", float(theta));
    g.f32("qwen2.attention.layer_norm_rms_epsilon", float(eps));
    g.u32("general.file_type", type == "f16" ? 1u : 0u);  // LLAMA_FTYPE_ALL_F32 / MOSTLY_F16

    // ---- tokenizer (get_vocab_base + SpecialVocab) ----
    const json tj = read_json(tok_dir / "tokenizer.json");
    json tc = json::object();
    if (fs::exists(tok_dir / "tokenizer_config.json")) tc = read_json(tok_dir / "tokenizer_config.json");
    const json& model = tj.at("model");
    if (model.value("type", "") != "BPE") fail("tokenizer.json: only BPE tokenizers are supported");
    std::vector<std::string> tokens(static_cast<size_t>(vocab_size));
    std::vector<int32_t> types(static_cast<size_t>(vocab_size), 0);
    std::vector<bool> have(static_cast<size_t>(vocab_size), false);
    for (auto& [tok, id] : model.at("vocab").items()) {
      const int64_t i = id.get<int64_t>();
      if (i < 0 || i >= vocab_size) fail("tokenizer.json: token id " + std::to_string(i) + " >= vocab_size");
      tokens[size_t(i)] = tok, types[size_t(i)] = 1, have[size_t(i)] = true;  // NORMAL
    }
    for (const auto& a : tj.value("added_tokens", json::array())) {
      const int64_t i = a.at("id").get<int64_t>();
      if (i < 0 || i >= vocab_size) fail("tokenizer.json: added token id " + std::to_string(i) + " >= vocab_size");
      const std::string c = a.at("content").get<std::string>();
      const bool looks_special = c.size() >= 4 && c.rfind("<|", 0) == 0 && c.compare(c.size() - 2, 2, "|>") == 0;
      tokens[size_t(i)] = c, have[size_t(i)] = true;
      types[size_t(i)] = a.value("special", false) || looks_special ? 3 : 4;  // CONTROL : USER_DEFINED
    }
    int64_t padded = 0;
    for (int64_t i = 0; i < vocab_size; ++i)
      if (!have[size_t(i)]) tokens[size_t(i)] = "[PAD" + std::to_string(i) + "]", types[size_t(i)] = 5, ++padded;
    std::vector<std::string> merges;
    for (const auto& m : model.at("merges")) {
      if (m.is_string()) merges.push_back(m.get<std::string>());
      else merges.push_back(m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    }
    g.str("tokenizer.ggml.model", "gpt2");
    g.str("tokenizer.ggml.pre", "qwen2");
    g.str_array("tokenizer.ggml.tokens", tokens);
    g.i32_array("tokenizer.ggml.token_type", types);
    g.str_array("tokenizer.ggml.merges", merges);
    // SpecialVocab: ids from tokenizer_config's *_token, else config.json's *_token_id.
    auto special = [&](const char* typ, const char* cfg_key) -> int64_t {
      if (tc.contains(typ)) {
        int id = token_id_of(tj, tc[typ]);
        if (id >= 0) return id;
      }
      if (cfg.contains(cfg_key) && cfg[cfg_key].is_number_integer()) return cfg[cfg_key].get<int64_t>();
      return -1;
    };
    const int64_t bos = special("bos_token", "bos_token_id"), eos = special("eos_token", "eos_token_id"),
                  padid = special("pad_token", "pad_token_id");
    if (bos >= 0) g.u32("tokenizer.ggml.bos_token_id", uint32_t(bos));
    if (eos >= 0) g.u32("tokenizer.ggml.eos_token_id", uint32_t(eos));
    if (padid >= 0) g.u32("tokenizer.ggml.padding_token_id", uint32_t(padid));
    if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
      g.boolean("tokenizer.ggml.add_bos_token", tc["add_bos_token"].get<bool>());
    if (tc.contains("chat_template") && tc["chat_template"].is_string())
      g.str("tokenizer.chat_template", tc["chat_template"].get<std::string>());
    g.u32("general.quantization_version", 2);

    // ---- tensors ----
    Safetensors st(dir);
    std::vector<OutTensor> outs;
    auto add = [&](const std::string& hf) {
      auto it = st.tensors.find(hf);
      if (it == st.tensors.end()) fail("checkpoint has no tensor " + hf);
      OutTensor t;
      t.src = hf;
      t.name = hf_to_gguf_name(hf);
      t.shape = it->second.shape;
      t.type = (type == "f16" && t.shape.size() == 2) ? GGML_TYPE_F16 : GGML_TYPE_F32;
      int64_t n = 1;
      for (auto d : t.shape) n *= d;
      t.bytes = uint64_t(n) * (t.type == GGML_TYPE_F16 ? 2 : 4);
      outs.push_back(t);
    };
    add("model.embed_tokens.weight");
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (const char* s : {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                            "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                            "self_attn.v_proj.bias", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
        add(p + s);
    }
    add("model.norm.weight");
    if (!tied) add("lm_head.weight");
    std::set<std::string> used;
    for (const auto& t : outs) used.insert(t.src);
    for (const auto& [name, t] : st.tensors)
      if (!used.count(name) && !(tied && name == "lm_head.weight"))
        std::fprintf(stderr, "hf_to_gguf: warning: tensor %s not converted\n", name.c_str());

    uint64_t off = 0;
    for (auto& t : outs) t.offset = off, off = pad(off + t.bytes);

    Buf head;
    head.pod<uint32_t>(0x46554747);  // "GGUF"
    head.pod<uint32_t>(3);
    head.pod<uint64_t>(outs.size());
    head.pod<uint64_t>(g.n_kv);
    head.b.insert(head.b.end(), g.kv.b.begin(), g.kv.b.end());
    for (const auto& t : outs) {
      head.str(t.name);
      head.pod<uint32_t>(uint32_t(t.shape.size()));
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) head.pod<uint64_t>(uint64_t(*it));  // ne[0] first
      head.pod<uint32_t>(t.type);
      head.pod<uint64_t>(t.offset);
    }
    head.b.resize(pad(head.b.size()), 0);

    const fs::path tmp = out_path.string() + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write " + tmp.string());
    std::fwrite(head.b.data(), 1, head.b.size(), f);
    uint64_t written = 0;
    std::vector<uint16_t> half;
    const std::vector<uint8_t> zeros(kAlign, 0);
    for (const auto& t : outs) {
      if (written != t.offset) fail("internal: offset mismatch for " + t.name);
      std::vector<float> v = to_f32(st.tensors.at(t.src), t.src);
      if (t.type == GGML_TYPE_F16) {
        half.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) half[i] = f32_to_f16(v[i]);
        std::fwrite(half.data(), 2, half.size(), f);
      } else {
        std::fwrite(v.data(), 4, v.size(), f);
      }
      written += t.bytes;
      const uint64_t p = pad(written) - written;
      std::fwrite(zeros.data(), 1, p, f);
      written += p;
    }
    if (std::fclose(f) != 0) fail("write failed: " + tmp.string());
    fs::rename(tmp, out_path);
    std::printf("wrote %s: %zu tensors, %llu KV, %s, vocab %lld (%lld padded), %zu merges, bos %lld eos %lld, %.1f MB\n",
                out_path.c_str(), outs.size(), (unsigned long long)g.n_kv, type.c_str(), (long long)vocab_size,
                (long long)padded, merges.size(), (long long)bos, (long long)eos,
                double(head.b.size() + written) / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_to_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
