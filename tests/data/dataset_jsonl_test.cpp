// JSONL loading: GSM8K out of the box, custom keys, every kind of bad row
// reported at FILE:LINE with the key and a fix, and the length policy
// counted rather than silent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::io;

namespace {

class JsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hpcrl_data_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& content) {
    std::string path = (dir_ / "d.jsonl").string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // The InputError message of loading `content`, or "" if it loaded.
  std::string error_of(const std::string& content, const JsonlOptions& opt = {}) {
    try {
      load_jsonl(write(content), opt);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

size_t chars(const std::string& s) { return s.size(); }

}  // namespace

TEST_F(JsonlTest, Gsm8kLoadsWithDefaults) {
  Dataset train = load_jsonl(std::string(HPCRL_DATA_DIR) + "/gsm8k/train.jsonl");
  ASSERT_EQ(train.size(), 7473u);
  EXPECT_EQ(train[0].prompt.substr(0, 14), "Natalia sold c");
  EXPECT_EQ(train[0].answer, "72");
  EXPECT_EQ(train[0].response.substr(train[0].response.size() - 8), "\n#### 72");
  EXPECT_EQ(train[0].line, 1u);
  EXPECT_EQ(train.report.rows, 7473u);
  EXPECT_EQ(train.report.kept, 7473u);
  Dataset test = load_jsonl(std::string(HPCRL_DATA_DIR) + "/gsm8k/test.jsonl");
  EXPECT_EQ(test.size(), 1319u);
  for (const Example& ex : test.examples) {
    ASSERT_FALSE(ex.answer.empty());
    ASSERT_EQ(ex.answer.find("####"), std::string::npos);
  }
}

TEST_F(JsonlTest, CustomKeysNumericAnswersBlankLinesCrlfAndBom) {
  JsonlOptions opt;
  opt.prompt_key = "problem";
  opt.answer_key = "final";
  opt.response_key = "solution";
  std::string content =
      "\xEF\xBB\xBF{\"problem\": \"1+1=\", \"solution\": \"\\\\boxed{2}\", \"final\": 2}\r\n"
      "\n"
      "   \n"
      "{\"problem\": \"half\", \"solution\": \"0.5\", \"final\": 0.5}\n";
  Dataset ds = load_jsonl(write(content), opt);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].prompt, "1+1=");
  EXPECT_EQ(ds[0].response, "\\boxed{2}");
  EXPECT_EQ(ds[0].answer, "2");
  EXPECT_EQ(ds[1].answer, "0.5");
  EXPECT_EQ(ds[1].line, 4u);
  EXPECT_EQ(ds.report.blank_lines, 2u);
  EXPECT_EQ(ds.report.summary(), "2 rows, kept 2; skipped 2 blank lines");
}

TEST_F(JsonlTest, MarkerDisabledKeepsWholeAnswer) {
  JsonlOptions opt;
  opt.answer_marker = "";
  Dataset ds = load_jsonl(write("{\"question\": \"q\", \"answer\": \" a #### b \"}\n"), opt);
  EXPECT_EQ(ds[0].answer, "a #### b");
}

TEST_F(JsonlTest, InvalidJsonNamesFileLineAndColumn) {
  std::string m = error_of("{\"question\": \"a\", \"answer\": \"1\"}\n{\"question\": \"b\", \"answer\": \"2\"}\n"
                           "{\"question\": \"c\" \"answer\": \"3\"}\n");
  EXPECT_NE(m.find("d.jsonl:3:25: invalid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("each line must be one JSON object"), std::string::npos) << m;
}

TEST_F(JsonlTest, NumberBeyondADoubleNamesFileLineAndColumn) {
  // nlohmann reports 1e999 as an out_of_range error without a position; it escaped the loader before.
  std::string m = error_of("{\"question\": \"a\", \"answer\": \"1\"}\n{\"question\": \"b\", \"answer\": 1e999}\n");
  // Line 2, column 29: where `1e999` starts in {"question": "b", "answer": 1e999}.
  EXPECT_NE(m.find("d.jsonl:2:29: invalid JSON (number 1e999 is beyond the range of a double"), std::string::npos)
      << m;
}

TEST_F(JsonlTest, MissingKeyListsKeysSuggestsAndSaysWhatToSet) {
  std::string m = error_of("{\"question\": \"a\", \"answer\": \"1\"}\n{\"qustion\": \"b\", \"answer\": \"2\"}\n");
  EXPECT_NE(m.find("d.jsonl:2: missing key 'question' (this row has keys: 'answer', 'qustion'; did you mean "
                   "'qustion'?); set the dataset's `prompt:` to the key that holds the prompt"),
            std::string::npos)
      << m;
  JsonlOptions opt;
  opt.response_key = "rationale";
  m = error_of("{\"question\": \"a\", \"answer\": \"1\"}\n", opt);
  EXPECT_NE(m.find("d.jsonl:1: missing key 'rationale'"), std::string::npos) << m;
  EXPECT_NE(m.find("`response:`"), std::string::npos) << m;
}

TEST_F(JsonlTest, WrongTypesNameTheKey) {
  std::string m = error_of("{\"question\": 7, \"answer\": \"1\"}\n");
  EXPECT_NE(m.find("d.jsonl:1: key 'question' is a number, expected a string;"), std::string::npos) << m;
  m = error_of("{\"question\": \"q\", \"answer\": [1]}\n");
  EXPECT_NE(m.find("d.jsonl:1: key 'answer' is an array, expected a string or a number"), std::string::npos) << m;
  m = error_of("{\"question\": \"q\", \"answer\": null}\n");
  EXPECT_NE(m.find("key 'answer' is null"), std::string::npos) << m;
  m = error_of("[\"question\", \"answer\"]\n");
  EXPECT_NE(m.find("d.jsonl:1: expected a JSON object, got an array"), std::string::npos) << m;
  m = error_of("{\"question\": \"q\", \"answer\": \"work\\n####  \"}\n");
  EXPECT_NE(m.find("d.jsonl:1: key 'answer' has '####' with nothing after it"), std::string::npos) << m;
}

TEST_F(JsonlTest, EmptyAndMissingFilesAreClearErrors) {
  std::string m = error_of("");
  EXPECT_NE(m.find("d.jsonl: empty dataset (0 lines, no JSON rows)"), std::string::npos) << m;
  m = error_of("\n\n  \n");
  EXPECT_NE(m.find("empty dataset (3 lines, no JSON rows); expected one JSON object per line with keys "
                   "'question' and 'answer'"),
            std::string::npos)
      << m;
  try {
    load_jsonl((dir_ / "nope.jsonl").string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset not found"), std::string::npos) << e.what();
  }
}

TEST_F(JsonlTest, LengthFilterIsCountedAndReported) {
  std::string content;
  for (int i = 0; i < 10; ++i) {
    std::string prompt = i < 3 ? std::string(20, 'p') : "short";             // 3 long prompts
    std::string solution = i >= 8 ? std::string(50, 's') + " #### 1" : "x #### 1";  // 2 long responses
    content += "{\"question\": \"" + prompt + "\", \"answer\": \"" + solution + "\"}\n";
  }
  JsonlOptions opt;
  opt.limits.max_prompt_tokens = 10;
  opt.limits.max_response_tokens = 20;
  opt.limits.length = chars;
  Dataset ds = load_jsonl(write(content), opt);
  EXPECT_EQ(ds.size(), 5u);
  EXPECT_EQ(ds.report.dropped_long_prompt, 3u);
  EXPECT_EQ(ds.report.dropped_long_response, 2u);
  EXPECT_EQ(ds.report.summary(),
            "10 rows, kept 5; dropped 3 with a prompt over the token limit; dropped 2 with a response over the "
            "token limit");
  for (const Example& ex : ds.examples) EXPECT_LE(ex.prompt.size(), 10u);

  opt.limits.long_response = LongResponsePolicy::kTruncate;
  Dataset cut = load_jsonl(write(content), opt);
  EXPECT_EQ(cut.size(), 7u);
  EXPECT_EQ(cut.report.truncated_response, 2u);
  EXPECT_EQ(cut[5].response, std::string(20, 's'));
  EXPECT_EQ(cut[5].answer, "1");  // the gold answer is kept
}

TEST_F(JsonlTest, DroppingEverythingIsAnError) {
  JsonlOptions opt;
  opt.limits.max_prompt_tokens = 2;
  opt.limits.length = chars;
  std::string m = error_of("{\"question\": \"long prompt\", \"answer\": \"1\"}\n", opt);
  EXPECT_NE(m.find("all 1 examples were dropped by the length limits (1 prompts > 2 tokens"), std::string::npos)
      << m;
  EXPECT_NE(m.find("raise max_prompt_tokens"), std::string::npos) << m;
}

TEST(TruncateToTokens, LongestFittingPrefixOnCharacterBoundaries) {
  auto bytes = [](const std::string& s) { return s.size(); };
  EXPECT_EQ(truncate_to_tokens("abcdef", 4, bytes), "abcd");
  EXPECT_EQ(truncate_to_tokens("abc", 4, bytes), "abc");
  EXPECT_EQ(truncate_to_tokens("a\xC3\xA9z", 2, bytes), "a");  // never splits 'é'
  // Words as tokens: the cut lands where the count first exceeds the limit.
  auto words = [](const std::string& s) {
    size_t n = 0;
    bool in = false;
    for (char c : s) {
      if (c != ' ' && !in) ++n;
      in = c != ' ';
    }
    return n;
  };
  std::string t = truncate_to_tokens("one two three four", 2, words);
  EXPECT_EQ(t, "one two ");
  EXPECT_EQ(words(t), 2u);
}

TEST(LongResponsePolicy, ParsesNamesAndSuggests) {
  EXPECT_EQ(parse_long_response_policy("truncate", "x"), LongResponsePolicy::kTruncate);
  try {
    parse_long_response_policy("filtr", "data.gsm8k.long_response");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data.gsm8k.long_response: unknown long-response policy 'filtr' (did you "
                                         "mean 'filter'?)"),
              std::string::npos)
        << e.what();
  }
}
