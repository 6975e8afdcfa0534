// Every file in tests/config/bad/ is a pipeline with known mistakes. Its
// header says what `validate` must report, exactly and in order:
//   # expect: LINE:COL: key.path: message; fix     (one line per error)
//   # world: N                                     (optional: --world N)
//   # set: a.b=v                                   (optional, repeatable: --set a.b=v)
// The test loads each file and compares the full list of errors (their text
// after the file name) with the expectations, so a missing error, an extra
// one, a wrong position or a changed message all fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hpcrl/config/loader.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;

namespace {

namespace stdfs = std::filesystem;

struct BadCase {
  std::vector<std::string> expects;
  std::vector<std::string> sets;
  int64_t world = 0;
};

BadCase read_case(const std::string& path) {
  BadCase c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (str::starts_with(line, "# expect: ")) c.expects.push_back(line.substr(10));
    else if (str::starts_with(line, "# set: ")) c.sets.push_back(line.substr(7));
    else if (str::starts_with(line, "# world: ")) c.world = std::stoll(line.substr(9));
  }
  return c;
}

// Paths relative to the repository root (the tests' working directory), as a user would type them.
std::vector<std::string> bad_files() {
  std::vector<std::string> out;
  for (const auto& e : stdfs::directory_iterator(stdfs::path(HPCRL_SOURCE_DIR) / "tests/config/bad"))
    if (e.path().extension() == ".yaml") out.push_back("tests/config/bad/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class BadConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(BadConfig, ReportsExactlyTheExpectedErrors) {
  const std::string& path = GetParam();
  BadCase c = read_case(path);
  ASSERT_FALSE(c.expects.empty()) << path << " has no '# expect:' line";
  config::ValidateOptions opt;
  opt.world = c.world;
  config::LoadResult res = config::check_pipeline_config(path, c.sets, opt);
  std::vector<std::string> got;
  for (const auto& e : res.diagnostics.errors) {
    std::string s = e.str();
    // "FILE:7:5: ..." -> "7:5: ..."; "FILE: whole-file problem" -> "whole-file problem"
    got.push_back(str::starts_with(s, path + ":") ? str::trim(s.substr(path.size() + 1)) : s);
  }
  std::string listing;
  for (const auto& g : got) listing += "\n  # expect: " + g;
  ASSERT_EQ(got.size(), c.expects.size()) << path << " reported:" << listing;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], c.expects[i]) << path << " error " << i;
}

INSTANTIATE_TEST_SUITE_P(Files, BadConfig, ::testing::ValuesIn(bad_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string stem = stdfs::path(info.param).stem().string();
                           std::replace(stem.begin(), stem.end(), '-', '_');
                           return stem;
                         });

TEST(BadConfigs, ThereAreAtLeastThirty) { EXPECT_GE(bad_files().size(), 30u); }

}  // namespace
