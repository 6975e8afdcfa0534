// `hpcrl plan` end to end through the built executable: --json prints exactly
// one JSON document of the docs/communication.md shape on stdout, text mode prints the
// layout, and a layout that does not fit --world exits 2 with the errors on
// stderr and nothing on stdout.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run(const std::string& args) {
  auto dir = std::filesystem::temp_directory_path();
  std::string out = (dir / ("plan-cli-out-" + std::to_string(getpid()))).string();
  std::string err = (dir / ("plan-cli-err-" + std::to_string(getpid()))).string();
  int status = std::system((std::string(HPCRL_BINARY) + " " + args + " >" + out + " 2>" + err).c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::string write_pipeline() {
  std::string path = (std::filesystem::temp_directory_path() / ("plan-cli-" + std::to_string(getpid()) + ".yaml")).string();
  std::ofstream(path) << R"(run: {name: plancli, device: cpu}
models:
  policy: {init: {preset: tiny}, parallel: {tp: 2, pp: 2}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
stages:
  - grpo: {policy: policy, reward: math, data: arith, iterations: 1, prompts: 4, group: 2}
)";
  return path;
}

TEST(PlanCli, JsonIsOneDocumentWithTheRankMap) {
  std::string yaml = write_pipeline();
  Result r = run("plan " + yaml + " --world 8 --gpus-per-node 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);  // throws unless stdout is exactly one document
  EXPECT_EQ(j["world"], 8);
  EXPECT_EQ(j["gpus_per_node"], 4);
  const auto& p = j["roles"]["policy"];
  EXPECT_EQ(p["parallel"]["dp"], 2);
  EXPECT_EQ(p["ranks"].size(), 8u);
  EXPECT_EQ(p["ranks"][6]["node"], 1);
  EXPECT_EQ(p["ranks"][6]["local_device"], 2);
  EXPECT_EQ(p["groups"]["pp"], nlohmann::json({{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_GT(p["memory_bytes"]["total"].get<int64_t>(), 0);
  EXPECT_TRUE(j["roles"].contains("policy.rollout"));
  EXPECT_TRUE(j["warnings"].is_array());
  std::filesystem::remove(yaml);
}

TEST(PlanCli, TextModeAndALayoutThatDoesNotFitTheWorld) {
  std::string yaml = write_pipeline();
  Result text = run("plan " + yaml + " --world 8");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("policy: tp=2 sp=1 ep=1 dp=2 pp=2 on ranks 0-7"), std::string::npos) << text.out;
  Result bad = run("plan " + yaml + " --world 6 --json");
  EXPECT_EQ(bad.code, 2) << bad.out << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  EXPECT_NE(bad.err.find("error: " + yaml), std::string::npos) << bad.err;  // file:line:col of the layout
  EXPECT_NE(bad.err.find("models.policy.parallel"), std::string::npos) << bad.err;
  std::filesystem::remove(yaml);
}

}  // namespace

namespace {

TEST(PlanCli, EstimatePredictsEveryStageOnAShippedProfile) {
  Result r = run("plan configs/quickstart.yaml --world 1 --estimate --hardware a100-40gb --response-len 20 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& stages = j.at("estimate").at("stages");
  ASSERT_EQ(stages.size(), 3u);  // sft, grpo, distill
  EXPECT_EQ(stages[1].at("stage"), "grpo");
  EXPECT_EQ(stages[1].at("response_tokens"), 20);
  EXPECT_GT(stages[1].at("generation_s").get<double>(), 0.0);
  // colocated: G + A + T + sync
  EXPECT_DOUBLE_EQ(stages[1].at("seconds").get<double>(),
                   stages[1].at("generation_s").get<double>() + stages[1].at("aux_s").get<double>() +
                       stages[1].at("train_s").get<double>() + stages[1].at("weight_sync_s").get<double>());
  EXPECT_EQ(j.at("estimate").at("profile").at("name"), "a100-40gb");
}

TEST(PlanCli, EstimateNeedsAKnownProfile) {
  Result none = run("plan configs/quickstart.yaml --world 1 --estimate");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--estimate requires --hardware"), std::string::npos) << none.err;
  Result unknown = run("plan configs/quickstart.yaml --world 1 --estimate --hardware a99");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("hardware profile 'a99' is neither a file nor a shipped profile"), std::string::npos)
      << unknown.err;
  EXPECT_TRUE(unknown.out.empty());
}

}  // namespace

// Before, CLI11's PositiveNumber answered "--world 0" with a float range printed in full.
TEST(PlanCli, WorldZeroSaysWhatAWorldIsInOneShortLine) {
  Result r = run("plan configs/quickstart.yaml --world 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--world 0: give the number of ranks the job runs with, a whole number from 1 to 1048576"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err;
}

// A shipped profile is named as a user would write it from the working directory, not by the
// absolute path of the tree the binary was built in.
TEST(PlanCli, AShippedProfileIsShownRelativeToTheWorkingDirectory) {
  Result r = run("plan configs/quickstart.yaml --world 1 --estimate --hardware cpu --response-len 20");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(profiles/cpu.yaml)"), std::string::npos) << r.out;
}
