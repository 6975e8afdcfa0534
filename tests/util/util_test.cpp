// util: CHECK messages, atomic writes, string helpers, progress durations.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/progress.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;

TEST(Check, NamesFileLineConditionAndHint) {
  try {
    int tp = 3;
    HPCRL_CHECK(8 % tp == 0, "heads=8 not divisible by tp=" << tp);
    FAIL() << "check did not throw";
  } catch (const RuntimeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("util_test.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("8 % tp == 0"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: heads=8 not divisible by tp=3"), std::string::npos) << m;
  }
}

TEST(Check, InputCheckThrowsInputError) {
  EXPECT_THROW(HPCRL_CHECK_INPUT(false, "bad"), InputError);
  EXPECT_NO_THROW(HPCRL_CHECK_INPUT(true, "fine"));
}

TEST(Fs, AtomicWriteReplacesAndLeavesNoTemp) {
  auto dir = std::filesystem::temp_directory_path() / "hpcrl_util_test";
  std::filesystem::remove_all(dir);
  std::string path = (dir / "a" / "f.txt").string();
  fs::write_file_atomic(path, "one");
  fs::write_file_atomic(path, "two");
  EXPECT_EQ(fs::read_file(path), "two");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir / "a")) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(Fs, ReadFileErrorsNameThePath) {
  try {
    fs::read_file("/nonexistent/x.yaml", "config");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("config not found: /nonexistent/x.yaml"), std::string::npos);
  }
  EXPECT_THROW(fs::read_file("/tmp", "config"), InputError);
}

TEST(Strings, ClosestSuggestsTypos) {
  EXPECT_EQ(str::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(str::closest("iteratons", {"iterations", "prompts", "group"}), "iterations");
  EXPECT_EQ(str::closest("zzzzzz", {"iterations", "prompts"}), "");
}

TEST(Strings, ParseIntList) {
  EXPECT_EQ(str::parse_int_list("1, 2,3", "--ids"), (std::vector<long long>{1, 2, 3}));
  EXPECT_THROW(str::parse_int_list("1,x", "--ids"), InputError);
}

TEST(Progress, DurationsFromSecondsToDays) {
  EXPECT_EQ(hpcrl::Progress::format_duration(12.34), "12.3s");
  EXPECT_EQ(hpcrl::Progress::format_duration(125), "2m05s");
  EXPECT_EQ(hpcrl::Progress::format_duration(3 * 3600 + 7 * 60), "3h07m");
  EXPECT_EQ(hpcrl::Progress::format_duration(86400 + 3600 + 61), "1d01h");  // 90061 s
}

TEST(Progress, TheEtaOfAnEndlessRunIsNotANegativeNumber) {
  // 2^63 - 1 steps at any rate: ~10^18 s left, which an int of hours would wrap to -2147483648h.
  EXPECT_EQ(hpcrl::Progress::format_duration(9.2e18), ">1000d");
  EXPECT_EQ(hpcrl::Progress::format_duration(std::numeric_limits<double>::infinity()), ">1000d");
}
