// ModelArch: presets, the shipped HF config.json files (parameter counts
// against the published ones), config.json round trip, and the errors for
// architectures and fields hpcrl cannot honour.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/util/error.h"

namespace hpcrl {
namespace {

const std::string kConfigs = std::string(HPCRL_SOURCE_DIR) + "/configs/models/";

std::string write_temp(const std::string& name, const std::string& text) {
  // One directory per process: ctest runs this file's tests in parallel, each writing config.json.
  auto dir = std::filesystem::temp_directory_path() / ("hpcrl_model_arch_test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// The error message of load_hf_config on `text`, or "" when it loads.
std::string config_error(const std::string& text) {
  std::string path = write_temp("config.json", text);
  try {
    load_hf_config(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kLlama = R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2 %s})";

std::string llama_with(const std::string& extra) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, kLlama, extra.c_str());
  return buf;
}

TEST(ModelArch, PresetsAreTheDocumentedShapes) {
  ModelArch tiny = model_arch_preset("tiny");
  EXPECT_EQ(tiny.num_layers, 4);
  EXPECT_EQ(tiny.hidden_size, 128);
  EXPECT_EQ(tiny.num_heads % tiny.num_kv_heads, 0);
  EXPECT_EQ(model_arch_preset("tiny-2l").num_layers, 2);
  EXPECT_EQ(tiny.bos_token_id, 256);  // io::ByteTokenizer's ids
  EXPECT_EQ(tiny.eos_token_ids, std::vector<int64_t>{257});
  // The benchmark configs are ~25M, ~100M and ~500M parameters.
  EXPECT_NEAR(model_arch_preset("small-25m").num_parameters() / 1e6, 25, 3);
  EXPECT_NEAR(model_arch_preset("base-100m").num_parameters() / 1e6, 100, 5);
  EXPECT_NEAR(model_arch_preset("large-500m").num_parameters() / 1e6, 500, 5);
  for (const auto& name : model_arch_preset_names()) EXPECT_EQ(model_arch_preset(name).vocab_size % 16, 0) << name;
}

TEST(ModelArch, UnknownPresetSuggestsTheClosest) {
  try {
    model_arch_preset("tiny2l");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'tiny-2l'"), std::string::npos) << e.what();
  }
}

TEST(ModelArch, ShippedConfigsMatchPublishedParameterCounts) {
  // Published totals (tied embeddings counted once).
  EXPECT_EQ(load_hf_config(kConfigs + "qwen2.5-0.5b/config.json").num_parameters(), 494032768);
  EXPECT_EQ(load_hf_config(kConfigs + "llama-3.2-1b/config.json").num_parameters(), 1235814400);
  EXPECT_EQ(load_hf_config(kConfigs + "qwen3-0.6b/config.json").num_parameters(), 596049920);
  EXPECT_NEAR(load_hf_config(kConfigs + "qwen2.5-1.5b/config.json").num_parameters() / 1e9, 1.54, 0.01);
  EXPECT_NEAR(load_hf_config(kConfigs + "mixtral-8x7b/config.json").num_parameters() / 1e9, 46.7, 0.1);
  EXPECT_NEAR(load_hf_config(kConfigs + "qwen1.5-moe-a2.7b/config.json").num_parameters() / 1e9, 14.3, 0.1);
}

TEST(ModelArch, FamilyFeaturesAreRead) {
  ModelArch q2 = load_hf_config(kConfigs + "qwen2.5-1.5b/config.json");
  EXPECT_TRUE(q2.attention_bias);
  EXPECT_FALSE(q2.qk_norm);
  EXPECT_TRUE(q2.tie_word_embeddings);
  EXPECT_EQ(q2.num_kv_heads, 2);
  EXPECT_EQ(q2.head_dim, 128);
  ModelArch q3 = load_hf_config(kConfigs + "qwen3-0.6b/config.json");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.attention_bias);
  EXPECT_EQ(q3.head_dim, 128);  // explicit head_dim ≠ hidden / heads (64)
  EXPECT_EQ(q3.eos_token_ids, std::vector<int64_t>{151645});
  ModelArch l3 = load_hf_config(kConfigs + "llama-3.2-1b/config.json");
  EXPECT_EQ(l3.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(l3.rope_scaling.factor, 32.0);
  EXPECT_EQ(l3.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(l3.rope_theta, 500000.0);
  ModelArch moe = load_hf_config(kConfigs + "qwen1.5-moe-a2.7b/config.json");
  EXPECT_EQ(moe.num_experts, 60);
  EXPECT_EQ(moe.experts_per_token, 4);
  EXPECT_EQ(moe.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(moe.norm_topk_prob);
  ModelArch mx = load_hf_config(kConfigs + "mixtral-8x7b/config.json");
  EXPECT_EQ(mx.num_experts, 8);
  EXPECT_EQ(mx.moe_intermediate_size, 14336);
  EXPECT_TRUE(mx.norm_topk_prob);
}

TEST(ModelArch, HfConfigRoundTrip) {
  for (const char* name : {"qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b", "qwen1.5-moe-a2.7b", "mixtral-8x7b"}) {
    ModelArch a = load_hf_config(kConfigs + name + "/config.json");
    ModelArch b = load_hf_config(write_temp("roundtrip.json", to_hf_config_json(a)));
    EXPECT_EQ(b.family, a.family) << name;
    EXPECT_EQ(b.num_parameters(), a.num_parameters()) << name;
    EXPECT_EQ(b.head_dim, a.head_dim) << name;
    EXPECT_EQ(b.rope_scaling.type, a.rope_scaling.type) << name;
    EXPECT_DOUBLE_EQ(b.rope_theta, a.rope_theta) << name;
    EXPECT_EQ(b.num_experts, a.num_experts) << name;
    EXPECT_EQ(b.norm_topk_prob, a.norm_topk_prob) << name;
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids) << name;
  }
}

TEST(ModelArch, UnsupportedModelTypeIsNamed) {
  std::string err = config_error(R"({"model_type": "gemma2", "vocab_size": 8})");
  EXPECT_NE(err.find("config.json: unsupported model_type 'gemma2'"), std::string::npos) << err;
  EXPECT_NE(err.find("supported: llama, qwen2, qwen3, qwen2_moe, mixtral"), std::string::npos) << err;
}

TEST(ModelArch, UnsupportedFieldsAreNamed) {
  EXPECT_NE(config_error(llama_with(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"))
                .find("unsupported rope_scaling type 'yarn'"),
            std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "hidden_act": "gelu")")).find("unsupported hidden_act = \"gelu\""),
            std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "attention_bias": true)")).find("unsupported attention_bias = true"),
            std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "quantization_config": {"bits": 4})")).find("quantization_config"),
            std::string::npos);
  std::string q2 = llama_with(R"(, "use_sliding_window": true)");
  q2.replace(q2.find("llama"), 5, "qwen2");
  EXPECT_NE(config_error(q2).find("unsupported use_sliding_window = true"), std::string::npos) << config_error(q2);
}

TEST(ModelArch, MalformedValuesAreNamedWithTheKey) {
  EXPECT_NE(config_error(llama_with(R"(, "rope_theta": "big")")).find("field 'rope_theta' must be a number"),
            std::string::npos);
  std::string missing = R"({"model_type": "llama", "vocab_size": 64})";
  EXPECT_NE(config_error(missing).find("missing required field 'hidden_size'"), std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "num_key_value_heads": 3)")).find("not a multiple of num_key_value_heads 3"),
            std::string::npos);
}

// Each parses as a number but cannot run: before, rope_theta -1 passed validate and the run
// died at step 0 with a NaN blamed on the learning rate.
TEST(ModelArch, RopeThetaMustBePositiveAndFinite) {
  EXPECT_NE(config_error(llama_with(R"(, "rope_theta": -1)")).find("rope_theta = -1 must be a positive finite number"),
            std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "rope_theta": 0)")).find("rope_theta = 0 must be a positive"),
            std::string::npos);
}

TEST(ModelArch, RmsNormEpsMustBeInZeroToOne) {
  EXPECT_NE(config_error(llama_with(R"(, "rms_norm_eps": 0)")).find("rms_norm_eps = 0 must be a positive"),
            std::string::npos);
  EXPECT_NE(config_error(llama_with(R"(, "rms_norm_eps": 2)")).find("rms_norm_eps = 2 must be below 1"),
            std::string::npos);
  EXPECT_EQ(config_error(llama_with(R"(, "rms_norm_eps": 1e-5, "rope_theta": 500000)")), "");
}

TEST(ModelArch, NegativeSharedExpertSizeIsRefused) {
  const std::string moe = R"({"model_type": "qwen2_moe", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_experts": 4, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": -16})";
  EXPECT_NE(config_error(moe).find("shared_expert_intermediate_size = -16 must be ≥ 0"), std::string::npos);
}

TEST(ModelArch, WholeNumbersWrittenAsFloatsAreReadAsIntegers) {
  // HF configs sometimes write 4096.0 for 4096; it is the same model.
  std::string path = write_temp("config.json", llama_with(R"(, "max_position_embeddings": 4096.0)"));
  EXPECT_EQ(load_hf_config(path).max_position_embeddings, 4096);
}

TEST(ModelArch, IntegerFieldsOutsideInt64AreRefusedWithTheKey) {
  // 3.33e104 is a whole number as a double, but no int64_t holds it (the fuzzer's input: converting
  // it was undefined behaviour); 2^63 = 9223372036854775808 is one past INT64_MAX; 18446744073709551615
  // parses as an unsigned 64-bit integer, also past INT64_MAX.
  for (const char* big : {"3.33e104", "9223372036854775808.0", "18446744073709551615", "-1e300"}) {
    std::string text = std::string(R"({"model_type": "llama", "vocab_size": )") + big +
                       R"(, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "num_key_value_heads": 2})";
    std::string err = config_error(text);
    EXPECT_NE(err.find("field 'vocab_size' must be an integer between -2^63 and 2^63 (got "), std::string::npos)
        << big << ": " << err;
  }
  // 4.5 is not a whole number.
  EXPECT_NE(config_error(llama_with(R"(, "max_position_embeddings": 4.5)"))
                .find("field 'max_position_embeddings' must be an integer"),
            std::string::npos);
}

TEST(ModelArch, SizesWhoseParameterCountOverflowsAreRefused) {
  // vocab 2^40 x hidden 2^20 = 2^60 embedding parameters: each field fits in int64_t, their product
  // is past the 2^50 hpcrl counts (an int64_t count would overflow a little further on).
  std::string text = R"({"model_type": "llama", "vocab_size": 1099511627776, "hidden_size": 1048576,
                         "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4})";
  std::string err = config_error(text);
  EXPECT_NE(err.find("parameters, beyond the 2^50 hpcrl can count; check vocab_size"), std::string::npos) << err;
}

TEST(ModelArch, InvalidJsonNamesLineAndColumn) {
  std::string err = config_error("{\n  \"model_type\": \"llama\",\n  \"vocab_size\": ,\n}");
  EXPECT_NE(err.find("config.json:3:"), std::string::npos) << err;
  EXPECT_NE(err.find("invalid JSON"), std::string::npos) << err;
}

TEST(ModelArch, NumberBeyondADoubleNamesLineAndColumn) {
  // Line 3 is `  "rope_theta": 1e999,`; the number starts at column 17.
  std::string err = config_error("{\n  \"model_type\": \"llama\",\n  \"rope_theta\": 1e999,\n}");
  EXPECT_NE(err.find("config.json:3:17: invalid JSON in config.json (number 1e999 is beyond the range of a double"),
            std::string::npos)
      << err;
}

TEST(ModelArch, DimsCarryTheLayoutRelevantNumbers) {
  ModelDims d = load_hf_config(kConfigs + "qwen2.5-0.5b/config.json").dims(4096);
  EXPECT_EQ(d.heads, 14);
  EXPECT_EQ(d.kv_heads, 2);
  EXPECT_EQ(d.layers, 24);
  EXPECT_EQ(d.vocab, 151936);
  EXPECT_EQ(d.seq_len, 4096);
  EXPECT_EQ(d.intermediate, 4864);
}

}  // namespace
}  // namespace hpcrl
