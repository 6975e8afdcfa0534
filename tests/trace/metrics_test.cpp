// metrics.jsonl: docs/tracing.md line shape, one complete line per step on disk as
// soon as it is written, rank 0 only, and resume truncation that keeps exactly
// the earlier steps.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "hpcrl/trace/metrics.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

std::vector<nlohmann::json> lines_of(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(path));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::pair<int, int64_t>> steps_of(const std::string& path) {
  std::vector<std::pair<int, int64_t>> out;
  for (const auto& j : lines_of(path)) out.emplace_back(j["stage_index"], j["step"]);
  return out;
}

}  // namespace

TEST(Metrics, OneOrderedObjectPerStepOnDiskImmediately) {
  TempDir dir("metrics");
  std::string path = dir.str() + "/sub/metrics.jsonl";
  trace::MetricsWriter w(path, 0);
  ASSERT_TRUE(w.active());
  w.write("sft", 0, 1, {{"loss", 2.5}, {"lr", 1e-3}, {"seconds/sft/step", 0.25}});
  auto first = read_text(path);  // readable before the writer closes
  EXPECT_EQ(first.substr(0, first.find("\"time\"")), "{\"stage\":\"sft\",\"stage_index\":0,\"step\":1,");
  EXPECT_EQ(first.substr(first.find(",\"loss\"")), ",\"loss\":2.5,\"lr\":0.001,\"seconds/sft/step\":0.25}\n");
  w.write("grpo", 1, 1, {{"reward/mean", 0.5}, {"kl", std::nan("")}});
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 2u);
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(lines[0]["time"].get<double>(), now, 60);
  EXPECT_EQ(lines[1]["stage"], "grpo");
  EXPECT_EQ(lines[1]["reward/mean"], 0.5);
  EXPECT_TRUE(lines[1]["kl"].is_null()) << "NaN is not JSON";
  EXPECT_THROW(w.write("sft", 0, 2, {{"step", 1}}), RuntimeError);
}

TEST(Metrics, OnlyRankZeroWrites) {
  TempDir dir("metrics_rank");
  std::string path = dir.str() + "/metrics.jsonl";
  trace::MetricsWriter w(path, 1);
  EXPECT_FALSE(w.active());
  w.write("sft", 0, 1, {{"loss", 1}});
  w.truncate_after(0, 0);
  EXPECT_FALSE(stdfs::exists(path));
}

TEST(Metrics, ReopeningAppends) {
  TempDir dir("metrics_append");
  std::string path = dir.str() + "/metrics.jsonl";
  { trace::MetricsWriter(path, 0).write("sft", 0, 1, {{"loss", 1}}); }
  { trace::MetricsWriter(path, 0).write("sft", 0, 2, {{"loss", 0.5}}); }
  EXPECT_EQ(steps_of(path), (std::vector<std::pair<int, int64_t>>{{0, 1}, {0, 2}}));
}

TEST(Metrics, TruncateAfterKeepsEarlierStepsDropsCutLineAndKeepsAppending) {
  TempDir dir("metrics_truncate");
  std::string path = dir.str() + "/metrics.jsonl";
  {
    trace::MetricsWriter w(path, 0);
    for (int step = 1; step <= 3; ++step) w.write("sft", 0, step, {{"loss", 1.0 / step}});
    for (int step = 1; step <= 4; ++step) w.write("grpo", 1, step, {{"reward/mean", 0.1 * step}});
  }
  std::string before = read_text(path);
  write_text(path, before + "{\"stage\":\"grpo\",\"stage_ind");  // crash mid-line
  trace::MetricsWriter w(path, 0);
  w.truncate_after(1, 2);
  EXPECT_EQ(steps_of(path), (std::vector<std::pair<int, int64_t>>{{0, 1}, {0, 2}, {0, 3}, {1, 1}, {1, 2}}));
  EXPECT_EQ(read_text(path), before.substr(0, before.find("{\"stage\":\"grpo\",\"stage_index\":1,\"step\":3")));
  w.write("grpo", 1, 3, {{"reward/mean", 0.9}});
  EXPECT_EQ(steps_of(path).back(), (std::pair<int, int64_t>{1, 3}));
  w.truncate_after(0, 2);  // resume into the first stage drops every later stage
  EXPECT_EQ(steps_of(path), (std::vector<std::pair<int, int64_t>>{{0, 1}, {0, 2}}));
  int files = 0;
  for (auto& e : stdfs::directory_iterator(dir.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "no temporary file left behind";
}

TEST(Metrics, TruncateRejectsAForeignLineNamingIt) {
  TempDir dir("metrics_bad");
  std::string path = dir.str() + "/metrics.jsonl";
  write_text(path, "{\"stage\":\"sft\",\"stage_index\":0,\"step\":1}\nnot json\n");
  trace::MetricsWriter w(path, 0);
  try {
    w.truncate_after(0, 5);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ":2: not a JSON object; metrics.jsonl holds one object per line (fix or remove the line)");
  }
  EXPECT_EQ(read_text(path), "{\"stage\":\"sft\",\"stage_index\":0,\"step\":1}\nnot json\n") << "left untouched";
}
