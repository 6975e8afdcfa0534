// Every GSM8K reference solution must earn the full reward against its own
// "#### N" answer and nothing against a different row's answer — the check
// that the default extractor order and normalisation handle real data
// (thousands separators, negatives, "The answer is <<8=8>>8." lines above the
// ####). Reads data/gsm8k/{train,test}.jsonl; a missing fixture
// fails the test.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpcrl/reward/verifiable.h"

using namespace hpcrl::reward;

namespace {

struct Row {
  std::string solution;
  std::string gold;        // text after "####"
  std::string gold_digits; // gold without thousands commas: the independent "same value" key
};

std::vector<Row> load(const std::string& split) {
  std::string path = std::string(HPCRL_DATA_DIR) + "/gsm8k/" + split + ".jsonl";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "fixture missing: " << path;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    Row r;
    r.solution = j.at("answer").get<std::string>();
    size_t p = r.solution.rfind("####");
    EXPECT_NE(p, std::string::npos) << line;
    size_t b = r.solution.find_first_not_of(' ', p + 4);
    r.gold = r.solution.substr(b);
    for (char c : r.gold) {
      if (c != ',') r.gold_digits += c;
    }
    rows.push_back(r);
  }
  return rows;
}

void check_split(const std::string& split, size_t expected_rows) {
  std::vector<Row> rows = load(split);
  ASSERT_EQ(rows.size(), expected_rows) << split;
  VerifiableReward reward;
  size_t own_full = 0, other_zero = 0, with_comma = 0, negative = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    RewardResult own = reward.score(rows[i].solution, rows[i].gold);
    EXPECT_EQ(own.score, 1.0) << split << " row " << i + 1 << ": extracted '" << own.extracted << "' by "
                              << own.extractor << ", gold '" << rows[i].gold << "'";
    own_full += own.score == 1.0;
    with_comma += rows[i].gold.find(',') != std::string::npos;
    negative += rows[i].gold[0] == '-';
    size_t j = (i + 1) % rows.size();
    while (rows[j].gold_digits == rows[i].gold_digits) j = (j + 1) % rows.size();
    RewardResult other = reward.score(rows[i].solution, rows[j].gold);
    EXPECT_EQ(other.score, 0.0) << split << " row " << i + 1 << " vs row " << j + 1;
    other_zero += other.score == 0.0;
  }
  std::cout << "[gsm8k " << split << "] rows " << rows.size() << ", own answer 1.0: " << own_full
            << ", other row's answer 0: " << other_zero << " (golds with thousands commas: " << with_comma
            << ", negative: " << negative << ")\n";
  EXPECT_EQ(own_full, rows.size());
  EXPECT_EQ(other_zero, rows.size());
}

}  // namespace

TEST(Gsm8kGold, TrainSolutionsScoreOneOnOwnAnswerZeroOnOthers) { check_split("train", 7473); }
TEST(Gsm8kGold, TestSolutionsScoreOneOnOwnAnswerZeroOnOthers) { check_split("test", 1319); }
