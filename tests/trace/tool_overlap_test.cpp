// The tool-calls table of `hpcrl trace summarize`: hand-made decode and tool
// spans pin the overlap arithmetic; a trace without tool calls has no table.
#include <gtest/gtest.h>

#include "hpcrl/trace/summary.h"
#include "trace_test_support.h"

using namespace hpcrl;

using trace_test::span_event;

TEST(ToolOverlap, CallTimeOverlappedByTheSameRanksDecodeSteps) {
  trace::TraceFile rank0, rank1;
  // Rank 0 decodes [0, 10), [10, 20) and [30, 40) µs; a call over [5, 35) overlaps 5 + 10 + 5 = 20 of its 30 µs,
  // a call over [38, 50) overlaps 2 of 12.
  rank0.events = {span_event("rollout/decode", 0, 0, 10),  span_event("rollout/decode", 0, 10, 10),
                  span_event("rollout/decode", 0, 30, 10), span_event("rollout/tool", 0, 5, 30, {}, 2),
                  span_event("rollout/tool", 0, 38, 12, {}, 2)};
  // Rank 1: a call of 20 µs while it decodes nothing (rank 0's steps do not count for it).
  rank1.events = {span_event("rollout/tool", 1, 0, 20, {}, 2)};
  const auto t = trace::tool_overlap({rank0, rank1});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->ranks, 2);
  EXPECT_EQ(t->calls, 3);
  EXPECT_NEAR(t->call_s, 62e-6, 1e-15);       // 30 + 12 + 20
  EXPECT_NEAR(t->decode_s, 30e-6, 1e-15);     // 10 + 10 + 10
  EXPECT_NEAR(t->hidden_share, 22.0 / 62.0, 1e-12);  // (20 + 2 + 0) / 62
}

TEST(ToolOverlap, ASummaryWithoutToolCallsHasNoTable) {
  trace::TraceFile f;
  f.events = {span_event("rollout/decode", 0, 0, 10)};
  EXPECT_FALSE(trace::tool_overlap({f}).has_value());
  EXPECT_EQ(trace::format_markdown(trace::summarize({f})).find("## Tool calls"), std::string::npos);
  f.events.push_back(span_event("rollout/tool", 0, 5, 10, {}, 2));
  const std::string md = trace::format_markdown(trace::summarize({f}));
  EXPECT_NE(md.find("| 1 | 1 | 0.000 | 0.010 | 0.000 | 50.0 % |"), std::string::npos) << md;
}
