// What --resume compares: two resolved configs key by key, the keys that may
// change on resume ignored, every other difference named with both values.
#include <gtest/gtest.h>

#include "hpcrl/config/loader.h"
#include "hpcrl/config/resume_diff.h"

using namespace hpcrl::config;

namespace {
const char* kPipeline = R"(run: {name: r, seed: 1, checkpoint_every: 5}
models:
  policy: {init: {preset: tiny}}
  reference: {init: {from: policy}, frozen: true}
rewards:
  math: {type: command, command: "true", timeout_s: 30}
data:
  arith: {synthetic: {task: arithmetic}}
stages:
  - sft: {model: policy, data: arith, steps: 10, batch: 8}
  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 2, prompts: 4, kl: {coef: 0.01}}
)";

PipelineConfig load(const std::vector<std::string>& sets) {
  LoadResult r = check_pipeline_text(kPipeline, "p.yaml", sets, {});
  EXPECT_TRUE(r.ok()) << (r.diagnostics.errors.empty() ? "" : r.diagnostics.errors[0].str());
  return r.config;
}
}  // namespace

TEST(ResumeDiff, TheSameConfigHasNoDifference) { EXPECT_TRUE(resume_differences(load({}), load({})).empty()); }

TEST(ResumeDiff, ChangedStepsAreNamedWithBothValues) {
  auto d = resume_differences(load({"stages[0].sft.steps=134"}), load({}));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key, "stages[0].sft.steps");
  EXPECT_EQ(d[0].saved, "134");
  EXPECT_EQ(d[0].now, "10");
  EXPECT_EQ(describe(d), "stages[0].sft.steps (saved 134, now 10)");
}

TEST(ResumeDiff, KeysThatChangeNothingACheckpointHoldsMayDiffer) {
  // Checkpoint cadence and retention, tracing, a command reward's patience, the watchdog's
  // patience (a requeued job on a slower file system may need more), the run's name.
  auto d = resume_differences(load({}), load({"run.checkpoint_every=50", "run.keep_last=5", "trace.chrome=false",
                                              "rewards.math.timeout_s=90", "run.comm_timeout_s=600",
                                              "run.name=other"}));
  EXPECT_TRUE(d.empty()) << describe(d);
}

TEST(ResumeDiff, AStageOrRoleAddedOrRemovedShowsAsAbsent) {
  auto d = resume_differences(load({}), load({"stages[2]={sft: {model: policy, data: arith, steps: 3, batch: 8}}"}));
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].key.rfind("stages[2].sft.", 0), 0u) << d[0].key;
  EXPECT_EQ(d[0].saved, "(absent)");
}

TEST(ResumeDiff, ResolvedValuesAreComparedAndLongListsCut) {
  // run.seed is also the synthetic dataset's resolved seed: 4 differences from 3 flags.
  auto d = resume_differences(load({"run.seed=2", "stages[0].sft.steps=3", "stages[0].sft.batch=4"}), load({}));
  ASSERT_EQ(d.size(), 4u) << describe(d);
  EXPECT_EQ(describe(d, 2), "data.arith.synthetic.seed (saved 2, now 1), run.seed (saved 2, now 1) and 2 more");
}
