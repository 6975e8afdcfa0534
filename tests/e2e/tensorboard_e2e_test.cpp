// End-to-end: with `trace: {tensorboard: true}` a run's TensorBoard event
// files, read by an independent reader (tests/trace/read_tfevents.py on
// Google's protobuf library), hold every finite metrics.jsonl value as the
// scalar "<stage>/<metric>" at its step, rounded to float32 as TensorBoard
// stores it, and nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "run_util.h"

using namespace hpcrl::test;

TEST(TensorBoardE2E, EventFilesHoldEveryMetricOfTheRun) {
  const std::string dir = scratch_dir("tensorboard");
  Proc run = run_hpcrl("run tests/e2e/data/tiny.yaml --set stages[0].sft.steps=6 --set stages[1].grpo.iterations=2"
                       " --set stages[2].distill.steps=2 --set trace.tensorboard=true --out " + dir + "/run");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Proc read = run_shell("for p in python3 /usr/bin/python3; do $p -c 'import google.protobuf' 2>/dev/null && exec $p "
                        "tests/trace/read_tfevents.py " + dir + "/run/tensorboard; done; exit 77");
  if (read.exit_code == 77) GTEST_SKIP() << "no python3 with google.protobuf (apt-get install python3-protobuf)";
  ASSERT_EQ(read.exit_code, 0) << read.output;
  std::map<std::pair<std::string, int64_t>, double> scalars;  // (tag, step) -> value
  std::istringstream lines(read.output);
  for (std::string l; std::getline(lines, l);) {
    if (l.empty() || l[0] != '{') continue;
    const auto j = nlohmann::json::parse(l);
    EXPECT_TRUE(scalars.emplace(std::make_pair(j.at("tag").get<std::string>(), j.at("step").get<int64_t>()),
                                j.at("value").get<double>()).second)
        << "a repeated scalar: " << l;
  }
  size_t expected = 0;
  for (const auto& line : read_metrics(dir + "/run/metrics.jsonl")) {
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
