// `hpcrl score` end to end: the JSON of the stories260k checkpoint equals the
// log-softmax of llama2.c's reference logits, the same numbers come out of a
// tp=2 and an sp=2 run under mpirun, pipelined runs (pp=2, pp=4, pp=2 × tp=2,
// every schedule) print the one-rank numbers, and bad input is exit status 2
// with a message naming the problem.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/shell.h"

namespace {

const std::string kModel = std::string(HPCRL_DATA_DIR) + "/stories260k";
const std::string kIds = "1,403,407,261,378,425,266,300,322,280,9,77,500,42,7,260";

using Result = hpcrl::test::ShellResult;

// stdout + stderr
Result sh(const std::string& cmd) { return hpcrl::test::run_command(cmd + " 2>&1"); }

// log p(ids[t] | ids[<t]) from the reference logits, in float64.
std::vector<double> reference_logprobs() {
  std::ifstream in(kModel + "/logits-reference.txt");
  std::vector<double> v;
  double x;
  while (in >> x) v.push_back(x);
  EXPECT_EQ(v.size(), 16u * 512u);
  std::vector<long> ids = {1, 403, 407, 261, 378, 425, 266, 300, 322, 280, 9, 77, 500, 42, 7, 260};
  std::vector<double> lp;
  for (int t = 0; t + 1 < 16; ++t) {
    double mx = -1e300, z = 0;
    for (int i = 0; i < 512; ++i) mx = std::max(mx, v[t * 512 + i]);
    for (int i = 0; i < 512; ++i) z += std::exp(v[t * 512 + i] - mx);
    lp.push_back(v[t * 512 + ids[t + 1]] - mx - std::log(z));
  }
  return lp;
}

void expect_reference(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  // --json output is the last line (rank 0's stdout); logs go to stderr.
  auto pos = r.out.rfind("{\"ids\"");
  ASSERT_NE(pos, std::string::npos) << r.out;
  auto doc = nlohmann::json::parse(r.out.substr(pos, r.out.find('\n', pos) - pos));
  EXPECT_EQ(doc["ids"].size(), 16u);
  auto want = reference_logprobs();
  ASSERT_EQ(doc["logprobs"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(doc["logprobs"][i].get<double>(), want[i], 2e-4) << i;
}

const std::string kMpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                            "mpirun -np 2 --oversubscribe ";
const std::string kMpirun4 = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                             "mpirun -np 4 --oversubscribe ";

std::vector<double> json_logprobs(const Result& r) {
  auto pos = r.out.rfind("{\"ids\"");
  if (r.status != 0 || pos == std::string::npos) return {};
  return nlohmann::json::parse(r.out.substr(pos, r.out.find('\n', pos) - pos))["logprobs"].get<std::vector<double>>();
}

// A pipelined run prints the reference numbers and the one-rank run's to 1e-5
// relative (absolute below 1). With tp the row-parallel matmuls add their halves
// in another order, so fp32 rounding grows with the log-prob's size (measured:
// 2.6e-5 at -8.1 for pp=2 × tp=2 on one 2-core machine, 3e-6 relative).
void expect_one_rank_numbers(const std::string& mpirun, const std::string& flags) {
  const std::string score = std::string(HPCRL_BINARY) + " score --model " + kModel + " --ids " + kIds + " --json";
  Result one = sh(score);
  Result many = sh(mpirun + score + " " + flags);
  SCOPED_TRACE(flags);
  expect_reference(many);
  auto a = json_logprobs(one), b = json_logprobs(many);
  ASSERT_EQ(a.size(), 15u) << one.out;
  ASSERT_EQ(b.size(), a.size()) << many.out;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * std::max(1.0, std::abs(a[i]))) << i;
}

TEST(ScoreCli, Stories260kMatchesReferenceLogprobs) {
  expect_reference(sh(std::string(HPCRL_BINARY) + " score --model " + kModel + " --ids " + kIds + " --json"));
}

TEST(ScoreCli, TensorAndSequenceParallelRunsGiveTheSameNumbers) {
  expect_reference(sh(kMpirun + HPCRL_BINARY + " score --model " + kModel + " --ids " + kIds + " --json --tp 2"));
  expect_reference(sh(kMpirun + HPCRL_BINARY + " score --model " + kModel + " --ids " + kIds + " --json --sp 2"));
}

TEST(ScoreCli, PipelineParallelRunsGiveTheOneRankNumbers) {
  expect_one_rank_numbers(kMpirun, "--pp 2");
  expect_one_rank_numbers(kMpirun, "--pp 2 --pp-schedule gpipe --pp-microbatches 3");
  expect_one_rank_numbers(kMpirun4, "--pp 4");
  expect_one_rank_numbers(kMpirun4, "--pp 2 --tp 2");
  expect_one_rank_numbers(kMpirun4, "--pp 2 --pp-virtual 2 --pp-schedule interleaved --pp-microbatches 4");
}

TEST(ScoreCli, BadInputIsExitTwoWithTheReason) {
  Result pp = sh(kMpirun + HPCRL_BINARY + " score --model " + kModel + " --ids 1,2 --pp 2 --pp-virtual 2 "
                 "--pp-schedule interleaved --pp-microbatches 3");
  EXPECT_EQ(pp.status, 2);
  EXPECT_NE(pp.out.find("needs the number of micro-batches to be a multiple of pp, got 3 micro-batches for pp=2"),
            std::string::npos) << pp.out;
  Result deep = sh(kMpirun + HPCRL_BINARY + " score --model " + kModel + " --ids 1,2 --pp 2 --pp-virtual 3");
  EXPECT_EQ(deep.status, 2);
  EXPECT_NE(deep.out.find("use at most 5 pipeline stages"), std::string::npos) << deep.out;
  Result id = sh(std::string(HPCRL_BINARY) + " score --model " + kModel + " --ids 1,999");
  EXPECT_EQ(id.status, 2);
  EXPECT_NE(id.out.find("token id 999 at position 1 is outside the model's vocabulary [0, 512)"), std::string::npos)
      << id.out;
  Result text = sh(std::string(HPCRL_BINARY) + " score --model " + kModel + " --text hello");
  EXPECT_EQ(text.status, 2);
  EXPECT_NE(text.out.find("has no tokenizer.json; pass --tokenizer DIR or use --ids"), std::string::npos) << text.out;
}

TEST(ScoreCli, PresetWithBuiltinTokenizerScoresText) {
  Result r = sh(std::string(HPCRL_BINARY) + " score --model preset:tiny-2l --text 'ab' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"ids\"")));
  EXPECT_EQ(doc["logprobs"].size() + 1, doc["ids"].size());
  for (const auto& lp : doc["logprobs"]) EXPECT_LT(lp.get<double>(), 0.0);
}

}  // namespace
