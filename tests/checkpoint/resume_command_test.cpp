// The resume command printed at a stop and in a refusal: the whole command,
// each argument one shell word, and command.json read back.
#include <gtest/gtest.h>

#include <filesystem>

#include "hpcrl/runner/resume_command.h"

using namespace hpcrl::runner;

TEST(ResumeCommand, ArgumentsThatNeedItAreSingleQuoted) {
  EXPECT_EQ(shell_quote("configs/quickstart.yaml"), "configs/quickstart.yaml");
  EXPECT_EQ(shell_quote("run.seed=3"), "run.seed=3");
  EXPECT_EQ(shell_quote("stages[0].sft.steps=20"), "'stages[0].sft.steps=20'");  // [ ] are glob characters
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(ResumeCommand, IsTheWholeCommandWithOutAndEverySet) {
  StartCommand c{"configs/quickstart.yaml", {"stages[0].sft.steps=20", "run.seed=3"}, "runs/q", 1};
  EXPECT_EQ(resume_command(c),
            "hpcrl run configs/quickstart.yaml --out runs/q --set 'stages[0].sft.steps=20' --set run.seed=3 --resume");
  c.world = 4;
  EXPECT_EQ(resume_command(c), "hpcrl run configs/quickstart.yaml --out runs/q --set 'stages[0].sft.steps=20' --set "
                               "run.seed=3 --resume  (with the same launcher and 4 ranks)");
}

TEST(ResumeCommand, CommandJsonReadsBackAndItsAbsenceIsNoError) {
  const std::string dir = testing::TempDir() + "/cmd-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(read_start_command(dir).has_value());
  write_start_command(dir, {"p.yaml", {"a=1"}, "runs/x", 2});
  auto back = read_start_command(dir);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->pipeline, "p.yaml");
  EXPECT_EQ(back->overrides, std::vector<std::string>{"a=1"});
  EXPECT_EQ(back->out, "runs/x");
  EXPECT_EQ(back->world, 2);
  std::filesystem::remove_all(dir);
}
