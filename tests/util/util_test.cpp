// util: CHECK messages, atomic writes, string helpers, progress durations.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "hpcrl/util/check.h"
#include "hpcrl/util/crc32c.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"
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

TEST(JsonErrors, SyntaxErrorOffsetIsTheCharacterTheParserStoppedOn) {
  const std::string text = "{\"a\": 1,\n \"b\": }";
  try {
    (void)nlohmann::json::parse(text);
    FAIL() << "parsed";
  } catch (const nlohmann::json::exception& e) {
    // The '}' at offset 15 (line 2, column 7: after the newline at offset 8).
    EXPECT_EQ(json_errors::offset(e, text), 15u);
    EXPECT_EQ(json_errors::line_col(text, json_errors::offset(e, text)), "2:7");
  }
}

TEST(JsonErrors, OverflowingNumberIsFoundByItsSpelling) {
  const std::string text = "[1, 2,\n -1e999]";
  try {
    (void)nlohmann::json::parse(text);
    FAIL() << "parsed";
  } catch (const nlohmann::json::exception& e) {
    // "-1e999" starts at offset 8: line 2, column 2.
    EXPECT_EQ(json_errors::offset(e, text), 8u);
    EXPECT_EQ(json_errors::line_col(text, 8), "2:2");
    EXPECT_EQ(json_errors::problem(e), "number -1e999 is beyond the range of a double (±1.8e308)");
  }
}

TEST(JsonErrors, LineColCountsFromTheFirstLineGiven) {
  EXPECT_EQ(json_errors::line_col("abc", 2, 41), "41:3");  // one JSONL row, line 41 of its file
  EXPECT_EQ(json_errors::line_col("", 5), "1:1");          // past the end: clamped
}

TEST(Crc32c, StandardCheckValues) {
  EXPECT_EQ(util::crc32c("123456789"), 0xE3069283u);  // the CRC-32C "check" value
  EXPECT_EQ(util::crc32c(""), 0u);
  EXPECT_EQ(util::crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4 test vectors
  EXPECT_EQ(util::crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

TEST(Crc32c, ExtendingInPiecesEqualsTheWhole) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  const uint32_t whole = util::crc32c(data);
  // Pieces of 1, 3, 8 and 13 bytes start at unaligned offsets and end in the byte-wise tail.
  for (size_t piece : {1u, 3u, 8u, 13u}) {
    uint32_t crc = 0;
    for (size_t at = 0; at < data.size(); at += piece)
      crc = util::crc32c_extend(crc, data.data() + at, std::min(piece, data.size() - at));
    EXPECT_EQ(crc, whole) << "pieces of " << piece;
  }
}

TEST(Crc32c, FileDigestIsTheSizeAndTheCrcOfTheBytes) {
  const std::string path = testing::TempDir() + "/digest.bin";
  fs::write_file_atomic(path, "123456789");
  util::FileDigest d = util::file_digest(path);
  EXPECT_EQ(d.bytes, 9u);
  EXPECT_EQ(d.crc32c, 0xE3069283u);
  EXPECT_THROW(util::file_digest(path + ".missing"), InputError);
}
