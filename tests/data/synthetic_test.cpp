// The synthetic arithmetic task: the worked-solution format, that the answer
// is readable from the steps, that the verifiable reward scores every
// solution 1.0, determinism, disjoint splits, and config validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "hpcrl/io/synthetic.h"
#include "hpcrl/reward/verifiable.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;
using namespace hpcrl::io;

namespace {

ArithmeticProblem problem(std::vector<long long> operands, std::vector<char> ops) {
  return ArithmeticProblem{std::move(operands), std::move(ops)};
}

SyntheticConfig config(int digits, int terms, const std::string& ops, size_t train, size_t eval, uint64_t seed = 1) {
  SyntheticConfig c;
  c.digits = digits;
  c.terms = terms;
  c.ops = ops;
  c.train = train;
  c.eval = eval;
  c.seed = seed;
  return c;
}

// Reads the answer back from the steps the way the format promises: the last
// step's total, then every other step's last character, last step first.
std::string answer_from_steps(const std::string& solution) {
  std::vector<std::string> steps;
  size_t start = 0;
  for (size_t p = solution.find(';'); p != std::string::npos; p = solution.find(';', start)) {
    steps.push_back(solution.substr(start, p - start));
    start = p + 1;
  }
  std::string last = steps.back();
  std::string answer = last.substr(last.rfind('=') + 1);
  for (size_t i = steps.size() - 1; i-- > 0;) answer += steps[i].back();
  size_t nz = answer.find_first_not_of('0');
  return nz == std::string::npos ? "0" : answer.substr(nz);
}

const std::vector<SyntheticConfig> kConfigs = {
    config(2, 2, "+", 3000, 200),  config(1, 3, "+", 300, 50),   config(3, 2, "+-", 2000, 200),
    config(2, 3, "-", 1000, 100),  config(4, 3, "+-", 1000, 100), config(3, 3, "+", 1500, 300),
};

}  // namespace

TEST(SyntheticFormat, WorkedSolutionsWriteCarriesAndBorrows) {
  EXPECT_EQ(arithmetic_prompt(problem({47, 85}, {'+'})), "47+85=");
  EXPECT_EQ(arithmetic_solution(problem({47, 85}, {'+'})), "7+5=12;4+8+1=13;\\boxed{132}");
  EXPECT_EQ(arithmetic_solution(problem({12, 34}, {'+'})), "2+4=6;1+3=4;\\boxed{46}");
  EXPECT_EQ(arithmetic_solution(problem({52, 48}, {'-'})), "2-8=-6+10=4;5-4-1=0;\\boxed{4}");
  EXPECT_EQ(arithmetic_solution(problem({99, 99, 99}, {'+', '+'})), "9+9+9=27;9+9+9+2=29;\\boxed{297}");
  EXPECT_EQ(arithmetic_solution(problem({50, 19, 19}, {'-', '-'})), "0-9-9=-18+20=2;5-1-1-2=1;\\boxed{12}");
  EXPECT_EQ(arithmetic_solution(problem({30, 30}, {'-'})), "0-0=0;3-3=0;\\boxed{0}");
  EXPECT_EQ(arithmetic_solution(problem({7, 5}, {'+'})), "7+5=12;\\boxed{12}");
  EXPECT_EQ(arithmetic_prompt(problem({347, 285, 100}, {'-', '+'})), "347-285+100=");
}

TEST(SyntheticFormat, DefaultTaskIsShort) {
  // The quickstart's byte-level model sees prompt + solution; keep them short.
  SyntheticSplits s = make_synthetic(SyntheticConfig{});
  size_t max_prompt = 0, max_solution = 0;
  for (const Example& ex : s.train.examples) {
    max_prompt = std::max(max_prompt, ex.prompt.size());
    max_solution = std::max(max_solution, ex.response.size());
  }
  EXPECT_EQ(max_prompt, 6u);
  EXPECT_LE(max_solution, 28u);
  EXPECT_GE(max_solution, 20u);
}

TEST(SyntheticTask, AnswerIsDerivableFromStepsAndRewardIsOne) {
  reward::VerifiableReward reward;
  for (const auto& cfg : kConfigs) {
    SyntheticSplits s = make_synthetic(cfg);
    for (const Dataset* ds : {&s.train, &s.eval}) {
      for (const Example& ex : ds->examples) {
        ASSERT_EQ(answer_from_steps(ex.response), ex.answer) << ex.prompt << ex.response;
        reward::RewardResult r = reward.score(ex.response, ex.answer);
        ASSERT_EQ(r.score, 1.0) << ex.prompt << ex.response;
        ASSERT_EQ(r.extractor, "boxed");
        ASSERT_EQ(reward.score(ex.response, std::to_string(std::stoll(ex.answer) + 1)).score, 0.0);
        ASSERT_GE(std::stoll(ex.answer), 0);
      }
    }
  }
}

TEST(SyntheticTask, DeterministicFromTheSeed) {
  for (const auto& cfg : kConfigs) {
    SyntheticSplits a = make_synthetic(cfg), b = make_synthetic(cfg);
    ASSERT_EQ(a.train.size(), cfg.train);
    ASSERT_EQ(a.eval.size(), cfg.eval);
    for (size_t i = 0; i < a.train.size(); ++i) ASSERT_EQ(a.train[i].prompt, b.train[i].prompt);
    for (size_t i = 0; i < a.eval.size(); ++i) ASSERT_EQ(a.eval[i].prompt, b.eval[i].prompt);
    SyntheticConfig other = cfg;
    other.seed = 2;
    SyntheticSplits c = make_synthetic(other);
    size_t same = 0;
    for (size_t i = 0; i < a.train.size(); ++i) same += a.train[i].prompt == c.train[i].prompt;
    EXPECT_LT(same, a.train.size() / 10) << "seed does not change the problems";
  }
}

TEST(SyntheticTask, SplitsAreDisjointAndDistinct) {
  for (const auto& cfg : kConfigs) {
    SyntheticSplits s = make_synthetic(cfg);
    std::unordered_set<std::string> eval;
    for (const Example& ex : s.eval.examples) ASSERT_TRUE(eval.insert(ex.prompt).second) << "repeat " << ex.prompt;
    std::unordered_set<std::string> train;
    for (const Example& ex : s.train.examples) {
      ASSERT_EQ(eval.count(ex.prompt), 0u) << ex.prompt << " is in both splits";
      train.insert(ex.prompt);
    }
    EXPECT_EQ(train.size(), s.train.size()) << "train repeats although enough problems exist";
    for (const Example& ex : s.eval.examples) {
      ASSERT_EQ(ex.prompt.size(), static_cast<size_t>(cfg.terms * (cfg.digits + 1))) << ex.prompt;
    }
  }
}

TEST(SyntheticTask, SmallSpaceCyclesTrainAndSaysSo) {
  SyntheticSplits s = make_synthetic(SyntheticConfig{});  // 2-digit addition: 8100 problems, train 20000
  ASSERT_EQ(s.train.size(), 20000u);
  ASSERT_EQ(s.eval.size(), 500u);
  std::set<std::string> distinct, eval;
  for (const Example& ex : s.eval.examples) eval.insert(ex.prompt);
  for (const Example& ex : s.train.examples) {
    ASSERT_EQ(eval.count(ex.prompt), 0u);
    distinct.insert(ex.prompt);
  }
  EXPECT_EQ(distinct.size(), 8100u - 500u);  // every non-eval problem is used
  EXPECT_EQ(s.train.report.note, "train cycles through 7600 distinct non-eval problems (2.63 times each on average)");
}

TEST(SyntheticTask, EvalDoesNotDependOnTrainSize) {
  for (int digits : {2, 4}) {
    SyntheticSplits small = make_synthetic(config(digits, 2, "+", 100, 50));
    SyntheticSplits large = make_synthetic(config(digits, 2, "+", 5000, 50));
    for (size_t i = 0; i < 50; ++i) ASSERT_EQ(small.eval[i].prompt, large.eval[i].prompt);
  }
}

TEST(SyntheticTask, BadConfigsNameTheKey) {
  auto error = [](const SyntheticConfig& c) -> std::string {
    try {
      make_synthetic(c);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  SyntheticConfig c;
  c.task = "arithmetc";
  EXPECT_NE(error(c).find("synthetic.task: unknown synthetic task 'arithmetc' (did you mean 'arithmetic'?)"),
            std::string::npos);
  EXPECT_NE(error(config(0, 2, "+", 10, 1)).find("synthetic.digits: 0 is outside 1..9"), std::string::npos);
  EXPECT_NE(error(config(2, 7, "+", 10, 1)).find("synthetic.terms: 7 is outside 2..6"), std::string::npos);
  EXPECT_NE(error(config(2, 2, "/", 10, 1)).find("synthetic.ops: \"/\" is not one of"), std::string::npos);
  EXPECT_NE(error(config(2, 3, "*", 10, 1)).find("products (ops \"*\") have terms: 2"), std::string::npos);
  EXPECT_NE(error(config(5, 2, "*", 10, 1)).find("digits 1..4"), std::string::npos);
  EXPECT_NE(error(config(2, 2, "+", 0, 1)).find("synthetic.train: must be at least 1"), std::string::npos);
  EXPECT_NE(error(config(1, 2, "+", 10, 81))
                .find("synthetic.eval: 81 eval problems requested but only 81 distinct problems exist"),
            std::string::npos);
}

namespace {

size_t median_length(std::vector<size_t> lengths) {
  std::sort(lengths.begin(), lengths.end());
  return lengths[lengths.size() / 2];
}

}  // namespace

TEST(SyntheticTask, ALongTailMakesOneProblemInTenAboutNineTimesTheMedian) {
  // 2 digits × 2 terms ("47+85=": a solution of ~27 characters) with long_tail
  // {every: 10, digits: 12, terms: 6}: positions 9, 19, ... hold 12-digit,
  // 6-term problems, whose 12 columns of 6 digits, 5 signs, a carry and a
  // two-digit total (~17 characters each) plus the boxed 13-digit answer come
  // to ~220 characters: at least 8× the median of the whole split.
  SyntheticConfig c = config(2, 2, "+", 1000, 100);
  c.long_tail.every = 10;
  const SyntheticSplits s = make_synthetic(c);
  for (const Dataset* split : {&s.train, &s.eval}) {
    std::vector<size_t> all, tail;
    for (size_t i = 0; i < split->size(); ++i) {
      const Example& ex = split->examples[i];
      const bool long_one = i % 10 == 9;
      // "123456789012+...": 12 digits before the first sign for a long one, 2 otherwise.
      EXPECT_EQ(ex.prompt.find('+'), long_one ? 12u : 2u) << split->name << " example " << i << ": " << ex.prompt;
      all.push_back(ex.response.size());
      if (long_one) tail.push_back(ex.response.size());
    }
    ASSERT_EQ(tail.size(), split->size() / 10);
    EXPECT_GE(median_length(tail), 8 * median_length(all)) << split->name;
  }
}

TEST(SyntheticTask, TheLongTailLeavesTheOtherProblemsAsTheyWere) {
  // Only the long positions change: the rest are the plain task's, so eval and train stay disjoint as before.
  SyntheticConfig plain = config(2, 2, "+", 200, 50);
  SyntheticConfig tailed = plain;
  tailed.long_tail.every = 10;
  const SyntheticSplits a = make_synthetic(plain), b = make_synthetic(tailed);
  for (size_t i = 0; i < a.train.size(); ++i)
    if (i % 10 != 9) EXPECT_EQ(a.train.examples[i].prompt, b.train.examples[i].prompt) << "train " << i;
  std::set<std::string> eval;
  for (const auto& ex : b.eval.examples) eval.insert(ex.prompt);
  for (const auto& ex : b.train.examples) EXPECT_EQ(eval.count(ex.prompt), 0u) << ex.prompt;
}

TEST(SyntheticTask, AProductWithCallsCallsTheCalculatorAndMarksItsReplyInserted) {
  // 482·739 = 356198: the call, the reply (its bytes [20, 43) marked inserted), the boxed answer.
  ArithmeticProblem p{{482, 739}, {'*'}};
  SyntheticCalls calls{"<calc>", "</calc>", "<result>", "</result>"};
  std::vector<std::pair<size_t, size_t>> inserted;
  const std::string s = product_solution(p, calls, inserted);
  EXPECT_EQ(s, "<calc>482*739</calc><result>356198</result>\\boxed{356198}");
  ASSERT_EQ(inserted.size(), 1u);
  EXPECT_EQ(s.substr(inserted[0].first, inserted[0].second - inserted[0].first), "<result>356198</result>");
}

TEST(SyntheticTask, AProductWithoutCallsIsTheBoxedAnswerAlone) {
  std::vector<std::pair<size_t, size_t>> inserted;
  EXPECT_EQ(product_solution({{12, 34}, {'*'}}, {}, inserted), "\\boxed{408}");  // 12·34 = 408
  EXPECT_TRUE(inserted.empty());
  auto splits = make_synthetic(config(2, 2, "*", 20, 5));
  for (const auto& ex : splits.train.examples) {
    const size_t star = ex.prompt.find('*');
    EXPECT_EQ(std::to_string(std::stoll(ex.prompt.substr(0, star)) * std::stoll(ex.prompt.substr(star + 1))), ex.answer);
  }
}
