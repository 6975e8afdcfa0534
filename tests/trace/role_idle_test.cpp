// The roles table of `hpcrl trace summarize` for disaggregated RL: hand-made
// rounds and wait spans pin the shares (busy = rounds − waits, per role over
// its ranks); a colocated trace has no table.
#include <gtest/gtest.h>

#include "hpcrl/trace/summary.h"
#include "trace_test_support.h"

using namespace hpcrl;

using trace_test::span_event;

TEST(RoleIdle, SharesPerRoleFromTheWaitSpansInsideRounds) {
  trace::TraceFile trainer, generator;
  // Trainer (rank 0): rounds 1000 us; 200 us receiving samples, 100 us sending weights → busy 0.7.
  trainer.events = {span_event("grpo/rounds", 0, 0, 1000, {{"generates", 0}}),
                    span_event("grpo/wait_samples", 0, 0, 150), span_event("grpo/weight_sync", 0, 400, 100),
                    span_event("grpo/wait_samples", 0, 500, 50),
                    span_event("grpo/wait_samples", 0, 2000, 999)};  // outside its rounds: not counted
  // Generator (rank 1): rounds 800 us; 400 us waiting for weights → busy 0.5.
  generator.events = {span_event("grpo/rounds", 1, 100, 800, {{"generates", 1}}),
                      span_event("grpo/wait_weights", 1, 300, 400)};
  const auto rows = trace::role_idle({trainer, generator});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].role, "generation");
  EXPECT_NEAR(rows[0].busy, 0.5, 1e-12);
  EXPECT_NEAR(rows[0].waiting_weights, 0.5, 1e-12);
  EXPECT_EQ(rows[1].role, "trainer");
  EXPECT_NEAR(rows[1].waiting_data, 0.2, 1e-12);
  EXPECT_NEAR(rows[1].waiting_weights, 0.1, 1e-12);
  EXPECT_NEAR(rows[1].busy, 0.7, 1e-12);
  EXPECT_NEAR(rows[1].seconds, 1e-3, 1e-15);
  EXPECT_EQ(rows[1].stage, "grpo");
}

TEST(RoleIdle, ColocatedTracesHaveNoRolesTable) {
  trace::TraceFile f;
  f.events = {span_event("grpo/iteration", 0, 0, 100), span_event("grpo/rollout", 0, 0, 60)};
  EXPECT_TRUE(trace::role_idle({f}).empty());
  EXPECT_EQ(trace::format_markdown(trace::summarize({f})).find("## Roles"), std::string::npos);
}
