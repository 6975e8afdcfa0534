// End-to-end: with `trace: {tensorboard: true}` a run's TensorBoard event
// files, read by an independent reader (tests/trace/read_tfevents.py on
// Google's protobuf library), hold every finite metrics.jsonl value as the
// scalar "<stage>/<metric>" at its step, rounded to float32 as TensorBoard
// stores it, and nothing else.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "run_util.h"

using namespace hpcrl::test;

namespace {
// What TensorBoard shows of RUN/tensorboard, read by tests/trace/read_tfevents.py (restarts applied):
// (tag, step) -> value; a repeated (tag, step) is a test failure. Empty when no python3 has protobuf.
std::map<std::pair<std::string, int64_t>, double> shown_scalars(const std::string& run, bool& skipped) {
  std::map<std::pair<std::string, int64_t>, double> scalars;
  Proc read = run_shell("for p in python3 /usr/bin/python3; do $p -c 'import google.protobuf' 2>/dev/null && exec $p "
                        "tests/trace/read_tfevents.py " + run + "/tensorboard; done; exit 77");
  skipped = read.exit_code == 77;
  if (skipped) return scalars;
  EXPECT_EQ(read.exit_code, 0) << read.output;
  std::istringstream lines(read.output);
  for (std::string l; std::getline(lines, l);) {
    if (l.empty() || l[0] != '{') continue;
    const auto j = nlohmann::json::parse(l);
    const std::string tag = j.at("tag").get<std::string>();
    EXPECT_EQ(j.at("run").get<std::string>().substr(3), tag.substr(0, tag.find('/'))) << "one run per stage: " << l;
    EXPECT_TRUE(scalars.emplace(std::make_pair(tag, j.at("step").get<int64_t>()), j.at("value").get<double>()).second)
        << "a repeated scalar: " << l;
  }
  return scalars;
}

// Every finite number of every metrics.jsonl line is shown at its step as its float32, and nothing else.
void expect_scalars_are_the_metrics(const std::map<std::pair<std::string, int64_t>, double>& scalars,
                                    const std::string& metrics_path) {
  size_t expected = 0;
  for (const auto& line : read_metrics(metrics_path)) {
    const std::string stage = line.at("stage");
    const int64_t step = line.at("step");
    for (const auto& [key, value] : line.items()) {
      if (key == "stage" || key == "stage_index" || key == "step" || key == "time" || !value.is_number()) continue;
      const double v = value.get<double>();
      if (!std::isfinite(float(v))) continue;
      ++expected;
      auto it = scalars.find({stage + "/" + key, step});
      ASSERT_NE(it, scalars.end()) << stage << "/" << key << " at step " << step;
      EXPECT_EQ(it->second, double(float(v))) << stage << "/" << key << " at step " << step;
    }
  }
  EXPECT_GT(expected, 30u);
  EXPECT_EQ(scalars.size(), expected) << "scalars that are not metrics";
}
}  // namespace

TEST(TensorBoardE2E, EventFilesHoldEveryMetricOfTheRun) {
  const std::string dir = scratch_dir("tensorboard");
  Proc run = run_hpcrl("run tests/e2e/data/tiny.yaml --set stages[0].sft.steps=6 --set stages[1].grpo.iterations=2"
                       " --set stages[2].distill.steps=2 --set trace.tensorboard=true --out " + dir + "/run");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  bool skipped = false;
  auto scalars = shown_scalars(dir + "/run", skipped);
  if (skipped) GTEST_SKIP() << "no python3 with google.protobuf (apt-get install python3-protobuf)";
  expect_scalars_are_the_metrics(scalars, dir + "/run/metrics.jsonl");
}

// A job killed after its last checkpoint wrote steps the resumed job writes again; TensorBoard must
// show each once, with the resumed job's values (the session START marker at the restart step).
TEST(TensorBoardE2E, ResumedRunShowsEachStepOnce) {
  const std::string cfg = "run tests/e2e/data/tiny.yaml --set 'stages=[{sft: {model: policy, data: arith, steps: 40, "
                          "batch: 32, lr: 3.0e-3}}]' --set run.checkpoint_every=5 --set run.eval_before_train=false"
                          " --set trace.tensorboard=true";
  std::string run;
  int64_t killed_at = 0;
  for (int attempt = 0; attempt < 3 && killed_at % 5 == 0; ++attempt) {  // a kill right at a checkpoint re-does nothing
    run = scratch_dir("tensorboard-resume-" + std::to_string(attempt)) + "/run";
    int pid = spawn_hpcrl(cfg + " --out " + run, 1, run + ".log");
    for (int i = 0; i < 1200 && read_metrics(run + "/metrics.jsonl").size() < 8; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(wait_exit(pid), 128 + SIGKILL);
    killed_at = read_metrics(run + "/metrics.jsonl").back().at("step").get<int64_t>();
  }
  ASSERT_NE(killed_at % 5, 0) << "every kill landed on a checkpoint step";
  Proc resumed = run_hpcrl(cfg + " --out " + run + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  bool skipped = false;
  auto scalars = shown_scalars(run, skipped);
  if (skipped) GTEST_SKIP() << "no python3 with google.protobuf (apt-get install python3-protobuf)";
  EXPECT_EQ(scalars.count({"sft/loss", killed_at}), 1u);
  expect_scalars_are_the_metrics(scalars, run + "/metrics.jsonl");
}
