// The `command` reward from YAML: both spellings of `command:` load into the
// argv CommandReward runs (a string through sh -c, a list as is), timeout_s
// defaults to 30, a program that cannot be found is a warning in validate and
// an error in run (at the command's file:line:col), and the loaded entry
// scores through the real helper program. Bad keys are in
// tests/config/bad/command_reward_*.yaml (exact messages, test_config).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpcrl/config/loader.h"
#include "hpcrl/reward/command_reward.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;

namespace {

std::string pipeline(const std::string& rewards, const std::string& used) {
  return "models:\n"
         "  policy: {init: {preset: tiny}}\n"
         "rewards:\n" +
         rewards +
         "data:\n"
         "  arith: {synthetic: {task: arithmetic, train: 100, eval: 10}}\n"
         "stages:\n"
         "  - sft: {model: policy, data: arith, steps: 1, batch: 4}\n"
         "  - grpo: {policy: policy, reward: " +
         used + ", data: arith, iterations: 1, prompts: 2, group: 2}\n";
}

std::string errors(const config::LoadResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.diagnostics.errors) out.push_back(e.str());
  return str::join(out, "\n");
}

}  // namespace

TEST(CommandRewardConfig, BothSpellingsLoadAndScore) {
  const std::string helper = HPCRL_REWARD_HELPER;
  std::string text = pipeline("  math: {type: verifiable}\n"
                              "  judge: {type: command, command: \"'" + helper + "' exact\", timeout_s: 2.5}\n"
                              "  argv: {type: command, command: ['" + helper + "', exact]}\n",
                              "[math, judge, argv]");
  config::LoadResult r = config::check_pipeline_text(text, "p.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << errors(r);
  EXPECT_TRUE(r.diagnostics.warnings.empty());
  const config::RewardConfig& judge = *r.config.find_reward("judge");
  EXPECT_EQ(judge.type, config::RewardType::command);
  EXPECT_EQ(judge.command, (std::vector<std::string>{"sh", "-c", "'" + helper + "' exact"}));
  EXPECT_DOUBLE_EQ(judge.timeout_s, 2.5);
  const config::RewardConfig& argv = *r.config.find_reward("argv");
  EXPECT_EQ(argv.command, (std::vector<std::string>{helper, "exact"}));
  EXPECT_DOUBLE_EQ(argv.timeout_s, 30.0);
  EXPECT_EQ(std::get<config::GrpoStage>(r.config.stages[1].body).rewards,
            (std::vector<std::string>{"math", "judge", "argv"}));

  for (const auto* rc : {&judge, &argv}) {
    reward::CommandReward cmd({rc->name, rc->command, rc->timeout_s});
    std::vector<reward::RewardSample> s{{"q", "12", "12"}, {"q", "12", "13"}};
    EXPECT_EQ(cmd.score(s), (std::vector<double>{1, 0})) << rc->name;
  }
}

TEST(CommandRewardConfig, MissingProgramWarnsInValidateAndFailsInRun) {
  std::string text = pipeline("  judge: {type: command, command: [/nonexistent/score.py, --strict]}\n"
                              "  shell: {type: command, command: \"hpcrl-no-such-judge --fast\"}\n"
                              "  piped: {type: command, command: \"cd /tmp && hpcrl-no-such-judge\"}\n",
                              "[judge, shell, piped]");
  config::LoadResult v = config::check_pipeline_text(text, "p.yaml", {}, {});
  ASSERT_TRUE(v.ok()) << errors(v);
  ASSERT_EQ(v.diagnostics.warnings.size(), 2u);  // `cd ...` is shell syntax: not checked
  EXPECT_EQ(v.diagnostics.warnings[0].str(),
            "p.yaml:4:35: rewards.judge.command: program '/nonexistent/score.py' does not exist or is not "
            "executable; install it or correct the command (relative paths start at the current directory); "
            "`run` stops here unless it exists where the job runs");
  EXPECT_EQ(v.diagnostics.warnings[1].str(),
            "p.yaml:5:35: rewards.shell.command: program 'hpcrl-no-such-judge' is not on PATH; install it or correct "
            "the command (relative paths start at the current directory); `run` stops here unless it exists where "
            "the job runs");
  config::ValidateOptions run;
  run.require_weights = true;
  config::LoadResult e = config::check_pipeline_text(text, "p.yaml", {}, run);
  ASSERT_EQ(e.diagnostics.errors.size(), 2u) << errors(e);
  EXPECT_EQ(e.diagnostics.errors[0].str(),
            "p.yaml:4:35: rewards.judge.command: program '/nonexistent/score.py' does not exist or is not "
            "executable; install it or correct the command (relative paths start at the current directory)");
}
