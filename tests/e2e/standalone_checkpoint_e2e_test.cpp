// A checkpoint's model directory stands alone: it records its tokenizer (a
// copy of tokenizer.json and tokenizer_config.json, or "hpcrl_tokenizer":
// "byte" in config.json), so `hpcrl generate`, `score`, `eval --model` and a
// pipeline's `init: {path: ...}` need nothing else; and the copies are covered
// by the checkpoint's checksums like the weights.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "io/tokenizer_bytes.h"
#include "run_util.h"

using namespace hpcrl::test;
namespace stdfs = std::filesystem;

namespace {

const std::string kConfig = "tests/e2e/data/tiny.yaml";

// Two SFT steps of tiny-2l (a checkpoint after each); `extra`: more --set flags.
std::string sft_args(const std::string& out, const std::string& extra = "") {
  return kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 2, batch: 8, lr: 1.0e-3}}]'" +
         " --set run.eval_before_train=false --set run.eval_sampling.prompts=4 --set run.checkpoint_every=1" +
         " --set run.keep_last=2" + extra +
         " --out " + out;
}

// A byte-level BPE tokenizer small enough for tiny-2l's 272 embedding rows: the 256 byte
// tokens (id = byte), two merges (ids 256, 257) and <|endoftext|> (258, EOS).
std::string write_small_tokenizer(const std::string& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& chars = hpcrl::io::bytes::byte_to_unicode();
  for (int b = 0; b < 256; ++b) vocab[chars[b]] = b;
  vocab["\\b"] = 256;
  vocab["ox"] = 257;
  vocab["<|endoftext|>"] = 258;
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                     {"use_regex", true}};
  const nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 258}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"ignore_merges", false},
                 {"vocab", vocab}, {"merges", {"\\ b", "o x"}}}}};
  stdfs::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << tok.dump(1);
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})";
  return dir;
}

// The model directory alone serves generate, score and eval, and a pipeline starts from it.
void expect_standalone(const std::string& model, const std::string& scratch) {
  std::ofstream(scratch + "/prompts.jsonl") << "{\"prompt\": \"12+7=\"}\n";
  Proc gen = run_hpcrl("generate --model " + model + " --prompts " + scratch + "/prompts.jsonl --max-new-tokens 4");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  Proc score = run_hpcrl("score --model " + model + " --text '12+7=19' --json");
  EXPECT_EQ(score.exit_code, 0) << score.output;
  Proc eval = run_hpcrl("eval --model " + model + " --data synthetic:digits=2,eval=4 --max-new-tokens 8 --json");
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  Proc init = run_hpcrl("run " + kConfig + " --set 'models.policy.init={path: " + model + "}'" +
                        " --set 'stages=[{sft: {model: policy, data: arith, steps: 1, batch: 8}}]'" +
                        " --set run.eval_before_train=false --set run.eval_sampling.prompts=4 --out " + scratch +
                        "/from-checkpoint");
  EXPECT_EQ(init.exit_code, 0) << init.output;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(StandaloneCheckpointE2E, ByteTokenizerCheckpointIsNamedInConfigJsonAndServesEveryCommand) {
  const std::string dir = scratch_dir("standalone-byte");
  Proc run = run_hpcrl("run " + sft_args(dir + "/run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string model = dir + "/run/checkpoints/00-sft/step-000002/policy";
  EXPECT_FALSE(stdfs::exists(model + "/tokenizer.json"));
  EXPECT_EQ(nlohmann::json::parse(read(model + "/config.json")).value("hpcrl_tokenizer", ""), "byte");
  expect_standalone(model, dir);
  // The run started from the checkpoint records the byte tokenizer in its own checkpoint too.
  const std::string again = dir + "/from-checkpoint/checkpoints/00-sft/step-000001/policy/config.json";
  ASSERT_TRUE(stdfs::exists(again));
  EXPECT_EQ(nlohmann::json::parse(read(again)).value("hpcrl_tokenizer", ""), "byte");
}

TEST(StandaloneCheckpointE2E, FileTokenizerIsCopiedBesideTheWeightsAndServesEveryCommand) {
  const std::string dir = scratch_dir("standalone-file");
  const std::string tok = write_small_tokenizer(dir + "/tok");
  Proc run = run_hpcrl("run " + sft_args(dir + "/run", " --set models.policy.tokenizer=" + tok));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string model = dir + "/run/checkpoints/00-sft/step-000002/policy";
  EXPECT_EQ(read(model + "/tokenizer.json"), read(tok + "/tokenizer.json"));
  EXPECT_EQ(read(model + "/tokenizer_config.json"), read(tok + "/tokenizer_config.json"));
  EXPECT_FALSE(nlohmann::json::parse(read(model + "/config.json")).contains("hpcrl_tokenizer"));
  expect_standalone(model, dir);
}

TEST(StandaloneCheckpointE2E, AFlippedByteInTheCopiedTokenizerFailsVerificationNamingTheFile) {
  const std::string dir = scratch_dir("standalone-crc");
  const std::string tok = write_small_tokenizer(dir + "/tok");
  const std::string args = sft_args(dir + "/run", " --set models.policy.tokenizer=" + tok);
  Proc run = run_hpcrl("run " + args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_NO_FATAL_FAILURE(back_to_checkpoint(dir + "/run", "00-sft", 1));  // step 1 is the only one left
  const std::string copy = dir + "/run/checkpoints/00-sft/step-000001/policy/tokenizer.json";
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(10);
    const char c = static_cast<char>(f.get());
    f.seekp(10);
    f.put(static_cast<char>(c ^ 0x01));  // same size, one bit different
  }
  Proc resumed = run_hpcrl("run " + args + " --resume");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_NE(resumed.output.find(copy + " does not match its checksum"), std::string::npos) << resumed.output;
}

TEST(StandaloneCheckpointE2E, TheByteTokenizerIsCalledByteOnTheCommandLineAndBuiltinStillWorks) {
  Proc byte = run_hpcrl("tokenize --tokenizer byte --text 'a' --json");
  ASSERT_EQ(byte.exit_code, 0) << byte.output;
  EXPECT_NE(byte.output.find(R"("ids":[97])"), std::string::npos) << byte.output;  // 'a' is byte 97
  Proc builtin = run_hpcrl("tokenize --tokenizer builtin --text 'a' --json");
  ASSERT_EQ(builtin.exit_code, 0) << builtin.output;
  EXPECT_NE(builtin.output.find(R"("ids":[97])"), std::string::npos) << builtin.output;
}
