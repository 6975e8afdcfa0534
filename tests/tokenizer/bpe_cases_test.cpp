// The fixture test vectors: every input of llama.cpp's ggml-vocab-{qwen2,
// llama-bpe} cases must encode to exactly the ids HF's own tokenizer produced
// (no BOS), using the real Qwen3 and Llama-3 tokenizer.json files.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("fixture missing: " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: inputs each followed by "\n__ggml_vocab_test__\n" (so the file ends with
// the separator; an input may itself be empty or all newlines). .out: one line
// of space-separated ids per input.
std::vector<Case> read_cases(const std::string& stem) {
  std::string inp = read_all(testing::fixture("tokenizers/cases/" + stem + ".inp"));
  std::string out = read_all(testing::fixture("tokenizers/cases/" + stem + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0, at; (at = inp.find(sep, pos)) != std::string::npos; pos = at + sep.size())
    cases.push_back({inp.substr(pos, at - pos), {}});
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= cases.size()) throw std::runtime_error(stem + ".out has more lines than .inp has inputs");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
  }
  if (i != cases.size()) throw std::runtime_error(stem + ".out has fewer lines than .inp has inputs");
  return cases;
}

void check_all(const std::string& tokenizer, const std::string& stem) {
  const Tokenizer& tok = testing::fixture_tokenizer(tokenizer);
  auto cases = read_cases(stem);
  ASSERT_EQ(cases.size(), 46u) << stem;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.encode(cases[i].text), cases[i].ids)
        << stem << " case " << i << ": " << nlohmann::json(cases[i].text).dump();
    // Byte-level BPE is lossless: HF's ids decode back to the input.
    EXPECT_EQ(tok.decode(cases[i].ids), cases[i].text) << stem << " case " << i;
  }
}

TEST(BpeCases, Qwen2CasesWithQwen3Tokenizer) { check_all("qwen3", "ggml-vocab-qwen2.gguf"); }

TEST(BpeCases, LlamaBpeCasesWithLlama3Tokenizer) { check_all("llama3", "ggml-vocab-llama-bpe.gguf"); }

}  // namespace
}  // namespace hpcrl::io
