// `--set key.path=value` overrides: typed and validated by the same schema as
// the file, errors naming the override, "did you mean" on unknown paths, list
// items by [i] or .i, rank-range keys with a dot, and the override visible in
// the resolved YAML (which loads back to the same config).
#include <gtest/gtest.h>

#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;
using namespace hpcrl::config;

namespace {

const char* kPipeline = R"(run: {name: ov}
models:
  policy: {init: {preset: tiny}}
  reference: {init: {from: policy}, frozen: true}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic}}
stages:
  - sft: {model: policy, data: arith, steps: 10, batch: 8}
  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 2, prompts: 4,
           kl: {coef: 0.01}}
)";

LoadResult load(const std::vector<std::string>& sets) { return check_pipeline_text(kPipeline, "p.yaml", sets, {}); }

std::vector<std::string> errors(const LoadResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.diagnostics.errors) out.push_back(e.str());
  return out;
}

TEST(Overrides, TypedValuesReplaceFileValues) {
  LoadResult r = load({"run.seed=7", "stages[0].sft.steps=5", "stages.1.grpo.clip=[0.1, 0.3]",
                       "stages[1].grpo.kl.estimator=k1", "models.policy.parallel.tp=2", "run.device=cuda"});
  ASSERT_TRUE(r.ok()) << str::join(errors(r), "\n");
  EXPECT_EQ(r.config.run.seed, 7);
  EXPECT_EQ(r.config.data[0].synthetic.seed, 7);  // inherits the overridden run.seed
  EXPECT_EQ(std::get<SftStage>(r.config.stages[0].body).steps, 5);
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(r.config.stages[1].body).clip_low, 0.1);
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(r.config.stages[1].body).clip_high, 0.3);
  EXPECT_EQ(std::get<GrpoStage>(r.config.stages[1].body).kl.estimator, KlEstimator::k1);
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(r.config.stages[1].body).kl.coef, 0.01);  // siblings untouched
  EXPECT_EQ(r.config.models[0].parallel.tp, 2);
  EXPECT_EQ(r.config.models[0].rollout.parallel.tp, 2);  // inherited by the rollout layout
  EXPECT_EQ(r.config.run.device, Device::cuda);
  EXPECT_EQ(r.config.pos("stages[0].sft.steps").str(), "--set stages[0].sft.steps=5");
  EXPECT_EQ(r.config.pos("stages[0].sft.batch").str(), "p.yaml:10:57");
}

TEST(Overrides, NewKeysAndWholeMappings) {
  LoadResult r = load({"trace={chrome: false}", "models.student.init.preset=tiny-2l",
                       "stages[2]={distill: {teacher: policy, student: student, data: arith, steps: 3, batch: 2}}"});
  ASSERT_TRUE(r.ok()) << str::join(errors(r), "\n");
  EXPECT_FALSE(r.config.trace.chrome);
  EXPECT_TRUE(r.config.trace.metrics);
  ASSERT_EQ(r.config.models.size(), 3u);
  EXPECT_EQ(r.config.models[2].init.preset, "tiny-2l");
  ASSERT_EQ(r.config.stages.size(), 3u);
  EXPECT_EQ(std::get<DistillStage>(r.config.stages[2].body).steps, 3);
}

TEST(Overrides, ErrorsNameTheOverride) {
  EXPECT_EQ(errors(load({"stages[0].sft.steps=abc"})),
            std::vector<std::string>{"--set stages[0].sft.steps=abc: stages[0].sft.steps: expected an integer ≥ 1, "
                                     "got 'abc'; write a whole number without quotes"});
  EXPECT_EQ(errors(load({"stages[1].grpo.temprature=0.7"})),
            std::vector<std::string>{"--set stages[1].grpo.temprature=0.7: stages[1].grpo.temprature: unknown key "
                                     "'temprature'; did you mean 'temperature'?"});
  EXPECT_EQ(errors(load({"rn.seed=3"})),
            std::vector<std::string>{"--set rn.seed=3: rn: unknown key 'rn'; did you mean 'run'?"});
  EXPECT_EQ(errors(load({"stages[1].grpo.loss_agg=mean"})),
            std::vector<std::string>{"--set stages[1].grpo.loss_agg=mean: stages[1].grpo.loss_agg: unknown value "
                                     "'mean'; use one of token_mean, seq_mean_token_sum, seq_mean_token_mean"});
}

TEST(Overrides, MalformedOverrides) {
  EXPECT_EQ(errors(load({"run.seed"})),
            std::vector<std::string>{"--set run.seed: expected KEY.PATH=VALUE; write e.g. --set stages[0].sft.steps=100 "
                                     "or --set run.seed=3"});
  EXPECT_EQ(errors(load({"stages[5].sft.steps=1"})),
            std::vector<std::string>{"--set stages[5].sft.steps=1: stages: has 2 items; index 5 is out of range; use an "
                                     "index below 2 (or 2 to append)"});
  EXPECT_EQ(errors(load({"run.name.x=1"})),
            std::vector<std::string>{"--set run.name.x=1: run.name: is 'ov', not a mapping, so it has no key 'x'; set "
                                     "run.name itself, e.g. --set run.name=VALUE"});
  EXPECT_EQ(errors(load({"stages[99999999999].sft.steps=1"})),
            std::vector<std::string>{"--set stages[99999999999].sft.steps=1: expected KEY.PATH=VALUE; write e.g. --set "
                                     "stages[0].sft.steps=100 or --set run.seed=3"});
  EXPECT_EQ(errors(load({"run.seed=[1,"})).size(), 1u);
  EXPECT_EQ(errors(load({"run.seed=[1,"}))[0].substr(0, 40), "--set run.seed=[1,: YAML syntax error: e");
}

TEST(Overrides, RankRangeKeysKeepTheirDot) {
  LoadResult r = load({"placement.mode=disaggregated", "placement.ranges.policy=[0, 1]",
                       "placement.ranges.policy.rollout=[2, 3]", "placement.ranges.reference=[0, 1]"});
  ASSERT_TRUE(r.ok()) << str::join(errors(r), "\n");
  ASSERT_EQ(r.config.placement.ranges.size(), 3u);
  EXPECT_EQ(r.config.placement.ranges[1].target, "policy.rollout");
  EXPECT_EQ(r.config.placement.ranges[1].first, 2);
  EXPECT_EQ(r.config.placement.ranges[1].last, 3);
}

TEST(Overrides, ResolvedYamlCarriesTheOverrideAndLoadsBack) {
  LoadResult r = load({"stages[1].grpo.temperature=0.7", "run.name=tuned"});
  ASSERT_TRUE(r.ok()) << str::join(errors(r), "\n");
  std::string yaml = to_yaml(r.config);
  EXPECT_NE(yaml.find("temperature: 0.7"), std::string::npos) << yaml;
  LoadResult again = check_pipeline_text(yaml, "resolved.yaml", {}, {});
  ASSERT_TRUE(again.ok()) << str::join(errors(again), "\n");
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(again.config.stages[1].body).sampling.temperature, 0.7);
  EXPECT_EQ(again.config.run.name, "tuned");
  EXPECT_EQ(again.config.run.out, "runs/tuned");
  auto body = [](const std::string& y) { return y.substr(y.find('\n')); };  // after the "# FILE ..." header
  EXPECT_EQ(body(to_yaml(again.config)), body(yaml));
}

}  // namespace
