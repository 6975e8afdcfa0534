// Shared by the tokenizer tests: the fixture tokenizers (loaded once per
// process; a missing fixture fails the test that asks for it) and a builder
// for small synthetic tokenizer.json files written to a temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "hpcrl/io/tokenizer.h"
#include "hpcrl/util/error.h"
#include "io/tokenizer_bytes.h"

namespace hpcrl::io::testing {

inline std::string fixture(const std::string& rel) { return std::string(HPCRL_DATA_DIR) + "/" + rel; }

// The fixture tokenizer in tokenizers/<name> ("qwen3", "llama3"), loaded once.
inline const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::unique_ptr<Tokenizer> qwen3, llama3;
  auto& slot = name == "qwen3" ? qwen3 : llama3;
  if (!slot) {
    std::string dir = fixture("tokenizers/" + name);
    if (!std::filesystem::exists(dir + "/tokenizer.json"))
      throw std::runtime_error("fixture missing: " + dir + "/tokenizer.json");
    slot = load_tokenizer(dir);
  }
  return *slot;
}

// A fresh temporary directory, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("hpcrl-tok-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

// A minimal byte-level BPE tokenizer.json: the 256 byte characters (id = byte
// value), then `merges` ("a b" strings, ids 256.. in order) and `extra` vocab.
inline nlohmann::json tiny_tokenizer_json(const std::vector<std::string>& merges,
                                          const std::vector<std::string>& extra = {}) {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& chars = bytes::byte_to_unicode();
  for (int b = 0; b < 256; ++b) vocab[chars[b]] = b;
  int next = 256;
  for (const auto& m : merges) {
    auto sp = m.find(' ');
    std::string merged = m.substr(0, sp) + m.substr(sp + 1);
    if (!vocab.contains(merged)) vocab[merged] = next++;
  }
  for (const auto& e : extra)
    if (!vocab.contains(e)) vocab[e] = next++;
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                         {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"ignore_merges", false},
                 {"vocab", vocab}, {"merges", merges}}},
  };
}

}  // namespace hpcrl::io::testing
