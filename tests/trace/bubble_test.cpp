// The pipeline-bubble table of `hpcrl trace summarize`: hand-made pp/step and
// pp/forward / pp/backward events pin the definition (idle share of each step
// on the stage's lane, averaged over steps) and the theory carried in the
// step's args; traces without pipelining have no table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hpcrl/trace/summary.h"
#include "trace_test_support.h"

using namespace hpcrl;

namespace {

trace::Event ev(const std::string& name, int64_t pid, int64_t lane, double ts, double dur, trace::Args args = {}) {
  return trace_test::span_event(name, pid, ts, dur, std::move(args), lane);
}

trace::Args step_args(int stage) {
  // pp = 2, m = 2: theory (p − 1) / (m + p − 1) = 1/3.
  return {{"stage", double(stage)}, {"stages", 2}, {"microbatches", 2}, {"virtual_stages", 1}, {"theory", 1.0 / 3}};
}

std::vector<trace::TraceFile> two_stage_trace() {
  const int64_t lane0 = trace::pipeline_lane(0), lane1 = trace::pipeline_lane(1);
  trace::TraceFile r0, r1;
  r0.path = "rank-00000.json";
  r1.path = "rank-00001.json";
  // Stage 0, step 1: passes 60 of 100 us -> 0.4; step 2: 80 of 100 us -> 0.2.
  r0.events = {ev("pp/step", 0, lane0, 0, 100, step_args(0)), ev("pp/forward", 0, lane0, 0, 20),
               ev("pp/forward", 0, lane0, 20, 20), ev("pp/backward", 0, lane0, 70, 20),
               ev("sft/step", 0, trace::kMainLane, 0, 400),  // other lanes do not count
               ev("pp/step", 0, lane0, 200, 100, step_args(0)), ev("pp/forward", 0, lane0, 200, 40),
               ev("pp/backward", 0, lane0, 250, 40)};
  // Stage 1: passes 50 of 100 us -> 0.5; a pass after the step is no part of it.
  r1.events = {ev("pp/step", 1, lane1, 0, 100, step_args(1)), ev("pp/forward", 1, lane1, 10, 20),
               ev("pp/backward", 1, lane1, 30, 30), ev("pp/forward", 1, lane1, 150, 30)};
  return {r0, r1};
}

// One rank, one span on the main lane: no pp/step spans.
std::vector<trace::TraceFile> unpipelined_trace() {
  trace::TraceFile plain;
  plain.path = "rank-00000.json";
  plain.events = {ev("sft/step", 0, trace::kMainLane, 0, 10)};
  return {plain};
}

}  // namespace

TEST(PipelineBubble, MeasuredIdleShareAndTheoryPerStage) {
  auto rows = trace::pipeline_bubbles(two_stage_trace());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].stage, 0);
  EXPECT_EQ(rows[0].steps, 2);
  EXPECT_EQ(rows[0].ranks, 1);
  EXPECT_NEAR(rows[0].measured, 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(rows[0].theory, 1.0 / 3);
  EXPECT_DOUBLE_EQ(rows[0].mean_step_s, 100e-6);
  EXPECT_EQ(rows[0].stages, 2);
  EXPECT_EQ(rows[0].microbatches, 2);
  EXPECT_EQ(rows[1].stage, 1);
  EXPECT_EQ(rows[1].steps, 1);
  EXPECT_NEAR(rows[1].measured, 0.5, 1e-12);
}

TEST(PipelineBubble, JsonHasOneRowPerStageAndNoneWithoutPipelining) {
  trace::Summary s = trace::summarize(two_stage_trace());
  ASSERT_EQ(s.bubbles.size(), 2u);
  const nlohmann::json j = nlohmann::json::parse(trace::format_json(s));
  const nlohmann::json& rows = j.at("pipeline_bubble");
  ASSERT_EQ(rows.size(), 2u);
  // Stage 0 (rank 0): 2 steps of 100 us, idle 0.4 and 0.2 -> 0.3; p = 2, m = 2, v = 1: theory 1/3.
  EXPECT_EQ(rows[0].at("stage").get<int64_t>(), 0);
  EXPECT_EQ(rows[0].at("ranks").get<int>(), 1);
  EXPECT_EQ(rows[0].at("steps").get<int64_t>(), 2);
  EXPECT_DOUBLE_EQ(rows[0].at("stages").get<double>(), 2);
  EXPECT_DOUBLE_EQ(rows[0].at("microbatches").get<double>(), 2);
  EXPECT_DOUBLE_EQ(rows[0].at("virtual_stages").get<double>(), 1);
  EXPECT_NEAR(rows[0].at("mean_step_s").get<double>(), 100e-6, 1e-12);
  EXPECT_NEAR(rows[0].at("measured").get<double>(), 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(rows[0].at("theory").get<double>(), 1.0 / 3);
  // Stage 1 (rank 1): 1 step of 100 us, idle 50 us -> 0.5; the same schedule.
  EXPECT_EQ(rows[1].at("stage").get<int64_t>(), 1);
  EXPECT_EQ(rows[1].at("ranks").get<int>(), 1);
  EXPECT_EQ(rows[1].at("steps").get<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(rows[1].at("stages").get<double>(), 2);
  EXPECT_DOUBLE_EQ(rows[1].at("microbatches").get<double>(), 2);
  EXPECT_DOUBLE_EQ(rows[1].at("virtual_stages").get<double>(), 1);
  EXPECT_NEAR(rows[1].at("mean_step_s").get<double>(), 100e-6, 1e-12);
  EXPECT_DOUBLE_EQ(rows[1].at("measured").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(rows[1].at("theory").get<double>(), 1.0 / 3);

  trace::Summary none = trace::summarize(unpipelined_trace());
  EXPECT_TRUE(none.bubbles.empty());
  EXPECT_TRUE(nlohmann::json::parse(trace::format_json(none)).at("pipeline_bubble").empty());
}

// The Markdown rendering: the table (one row per stage; stage 0's shown) only with pipelining.
TEST(PipelineBubble, MarkdownHasTheTableOnlyWithPipelining) {
  const std::string md = trace::format_markdown(trace::summarize(two_stage_trace()));
  EXPECT_NE(md.find("## Pipeline bubble"), std::string::npos) << md;
  // | pp stage | ranks | steps | p | m | v | mean step ms | bubble measured | bubble theory |
  EXPECT_NE(md.find("| 0 | 1 | 2 | 2 | 2 | 1 | 0.100 | 0.300 | 0.333 |"), std::string::npos) << md;
  EXPECT_EQ(trace::format_markdown(trace::summarize(unpipelined_trace())).find("Pipeline bubble"), std::string::npos);
}
