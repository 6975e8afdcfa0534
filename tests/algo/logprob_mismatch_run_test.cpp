// A short CPU GRPO run (the pipeline `hpcrl run` executes, in this process):
// metrics.jsonl carries the train/inference mismatch at the iterations the
// schedule measures and not between, on the tiny model below the bound
// measured for the CPU engine's kernels against the trainer's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/runner/pipeline_runner.h"

namespace hpcrl {
namespace {

// The CPU engine's row kernels against LibTorch's forward, fp32, on the tiny model: measured
// 2.4e-7 to 2.9e-7 mean |Δ| and at most 2.4e-6 max |Δ| per iteration (docs/tracing.md, "measured").
constexpr double kMeanBound = 1e-6;
constexpr double kMaxBound = 1e-5;

const char* kPipeline = R"(run: {name: mismatch-run, seed: 3, checkpoint_every: 0}
models:
  policy: {init: {preset: tiny-2l}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, terms: 2, train: 64, eval: 8}}
stages:
  - grpo: {policy: policy, reward: math, data: arith, iterations: 3, prompts: 4, group: 4, max_new_tokens: 16,
           temperature: 1.0, lr: 1.0e-4, logprob_mismatch_every: 2}
trace: {chrome: false, metrics: true}
)";

std::vector<nlohmann::json> grpo_iteration_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("stage", "") == "grpo" && j.contains("reward/mean")) out.push_back(j);
  }
  return out;
}

TEST(LogprobMismatchRun, ACpuGrpoRunLogsTheMismatchOnScheduleBelowTheBound) {
  dist::init(nullptr, nullptr);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hpcrl-mismatch-run-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "pipeline.yaml") << kPipeline;
  runner::RunOptions options;
  options.config_path = (dir / "pipeline.yaml").string();
  options.out = (dir / "run").string();
  ASSERT_EQ(runner::run_pipeline(options), 0);
  const auto lines = grpo_iteration_lines((dir / "run" / "metrics.jsonl").string());
  ASSERT_EQ(lines.size(), 3u);
  // logprob_mismatch_every: 2 measures iterations 0 and 2 (steps 1 and 3), not iteration 1 (step 2).
  for (const auto& line : lines) {
    const int64_t step = line["step"].get<int64_t>();
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_GT(line["response_len/mean"].get<double>(), 0.0);  // there were response tokens to compare
    if (step == 2) {
      EXPECT_FALSE(line.contains("mismatch/logprob_abs_mean"));
      continue;
    }
    ASSERT_TRUE(line.contains("mismatch/logprob_abs_mean"));
    const double mean = line["mismatch/logprob_abs_mean"].get<double>();
    const double max = line["mismatch/logprob_abs_max"].get<double>();
    const double kl = line["mismatch/kl"].get<double>();
    EXPECT_LE(mean, kMeanBound);
    EXPECT_LE(max, kMaxBound);
    EXPECT_LE(mean, max);
    EXPECT_GE(kl, 0.0);
    EXPECT_LE(kl, kMaxBound * kMaxBound);  // k3 = exp(r) - 1 - r ≈ r²/2 for small r, so mean k3 ≤ max |r|²
    EXPECT_TRUE(line.contains("seconds/mismatch_logprob"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpcrl
