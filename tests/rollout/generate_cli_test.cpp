// `hpcrl generate` end to end: the output file holds one docs/rollout.md object per
// sample, in (prompt, sample) order, whose text is the decoded ids and whose
// log-probs are the model's; the same command under mpirun with the model
// split (tp=2) or the prompts divided (sp=2 replicas) writes the same samples;
// bad input exits with status 2, a message naming the problem, and no file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "hpcrl/io/tokenizer.h"
#include "support/shell.h"

namespace {

using namespace hpcrl;

using Result = hpcrl::test::ShellResult;

// stdout + stderr
Result sh(const std::string& cmd) { return hpcrl::test::run_command(cmd + " 2>&1"); }

const std::string kMpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                            "mpirun -np 2 --oversubscribe ";

class GenerateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hpcrl-generate-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    prompts_ = write("prompts.jsonl",
                     "{\"prompt\": \"12+7=\"}\n"
                     "{\"prompt_ids\": [1, 65, 66, 67]}\n"
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 3+4?\"}]}\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string generate(const std::string& args) const {
    return std::string(HPCRL_BINARY) + " generate --model preset:tiny " + args;
  }
  static std::vector<nlohmann::json> read_jsonl(const std::string& file) {
    std::ifstream in(file);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  std::filesystem::path dir_;
  std::string prompts_;
};

TEST_F(GenerateCli, WritesOneDesignObjectPerSample) {
  const std::string out = path("out.jsonl");
  Result r = sh(generate("--prompts " + prompts_ + " --n 2 --max-new-tokens 12 --temperature 0.8 --seed 3 --out " +
                         out));
  ASSERT_EQ(r.status, 0) << r.out;
  auto lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 6u);
  auto tok = io::load_tokenizer("builtin");
  const std::vector<std::string> keys = {"prompt_index", "sample_index", "prompt",   "prompt_ids",
                                         "response",     "response_ids", "logprobs", "finish_reason"};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& j = lines[i];
    std::vector<std::string> got;
    for (auto it = j.begin(); it != j.end(); ++it) got.push_back(it.key());
    std::sort(got.begin(), got.end());
    auto want = keys;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(j["prompt_index"].get<int64_t>(), int64_t(i / 2));
    EXPECT_EQ(j["sample_index"].get<int64_t>(), int64_t(i % 2));
    auto ids = j["response_ids"].get<std::vector<int32_t>>();
    auto lps = j["logprobs"].get<std::vector<double>>();
    ASSERT_EQ(ids.size(), lps.size());
    ASSERT_GE(ids.size(), 1u);
    EXPECT_LE(ids.size(), 12u);
    for (double lp : lps) EXPECT_LE(lp, 0.0);
    EXPECT_EQ(j["response"].get<std::string>(), tok->decode(ids, /*skip_special=*/true));
    const std::string reason = j["finish_reason"];
    EXPECT_TRUE(reason == "length" ? ids.size() == 12u : reason == "stop") << reason;
  }
  EXPECT_EQ(lines[0]["prompt"], "12+7=");
  EXPECT_EQ(lines[0]["prompt_ids"].get<std::vector<int32_t>>(), tok->encode("12+7=", true));
  EXPECT_EQ(lines[2]["prompt_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{1, 65, 66, 67}));
  EXPECT_NE(lines[4]["prompt"].get<std::string>().find("<|im_start|>assistant\n"), std::string::npos);
  // Without --out the same lines go to stdout.
  Result again = sh(generate("--prompts " + prompts_ + " --n 2 --max-new-tokens 12 --temperature 0.8 --seed 3 "
                             "--log-level off 2>/dev/null"));
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(again.out, ss.str());
}

TEST_F(GenerateCli, SplitModelAndSplitPromptsWriteTheSameSamples) {
  const std::string args = "--prompts " + prompts_ + " --n 3 --max-new-tokens 10 --seed 5 --temperature 1 --out ";
  Result one = sh(generate(args + path("one.jsonl")));
  ASSERT_EQ(one.status, 0) << one.out;
  Result tp = sh(kMpirun + generate(args + path("tp.jsonl") + " --tp 2"));
  ASSERT_EQ(tp.status, 0) << tp.out;
  Result sp = sh(kMpirun + generate(args + path("sp.jsonl") + " --sp 2"));
  ASSERT_EQ(sp.status, 0) << sp.out;
  // A pipelined model decodes on a whole copy gathered from its stages.
  Result pp = sh(kMpirun + generate(args + path("pp.jsonl") + " --pp 2"));
  ASSERT_EQ(pp.status, 0) << pp.out;
  auto want = read_jsonl(path("one.jsonl"));
  ASSERT_EQ(want.size(), 9u);
  for (const char* name : {"tp.jsonl", "sp.jsonl", "pp.jsonl"}) {
    auto got = read_jsonl(path(name));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i]["response_ids"], want[i]["response_ids"]) << name << " line " << i;
      auto a = got[i]["logprobs"].get<std::vector<double>>(), b = want[i]["logprobs"].get<std::vector<double>>();
      ASSERT_EQ(a.size(), b.size());
      for (size_t t = 0; t < a.size(); ++t) EXPECT_NEAR(a[t], b[t], 1e-5) << name << " line " << i;
    }
  }
}

TEST_F(GenerateCli, BadInputExitsTwoWithTheReasonAndWritesNothing) {
  const std::string out = path("never.jsonl");
  auto expect_error = [&](const std::string& args, const std::string& message) {
    Result r = sh(generate(args + " --out " + out));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  const std::string empty = write("empty.jsonl", "\n");
  expect_error("--prompts " + empty, empty + " has no prompts");
  expect_error("--prompts " + prompts_ + " --n 0", "--n 0: the number of samples per prompt must be at least 1");
  expect_error("--prompts " + prompts_ + " --temprature 0.5",
               "unknown option '--temprature' for hpcrl generate; did you mean --temperature?");
  expect_error("--prompts " + prompts_ + " --top-p 1.5", "--top-p 1.5: must be in (0, 1] (1 = off)");
  expect_error("--prompts " + prompts_ + " --chat-template chatm",
               "--chat-template 'chatm': did you mean 'chatml'? (one of auto, none, chatml, qwen3, llama3)");
  const std::string long_prompt = write("long.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \"" +
                                                          std::string(2040, 'x') + "\"}\n");
  expect_error("--prompts " + long_prompt + " --max-new-tokens 20",
               long_prompt + ":2: the prompt has 2041 tokens; with --max-new-tokens 20 it exceeds the model's "
                             "context of 2048 tokens");
  expect_error("--prompts " + path("missing.jsonl"), "prompt file not found: " + path("missing.jsonl"));
}

}  // namespace
