// `hpcrl eval` end to end. Offline: a responses file written here scores to
// hand-computed values (per line and pass@k), and bad lines exit 2 naming
// FILE:LINE and the fix. With a model: a random tiny model is saved as an HF
// directory; its greedy answers are turned into a dataset whose even rows carry
// the model's own last number as the gold answer and odd rows a wrong one, so
// the accuracy is known in advance. `hpcrl eval` must report exactly that, equal
// to algo::evaluate in process, and the same under mpirun with tp=2 and dp=2;
// sampled pass@k (n = 4) must equal offline scoring of `hpcrl generate`'s
// samples of the same prompts and seed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/stages/pass_at_k.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/engine.h"
#include "support/shell.h"

namespace {

using namespace hpcrl;
using nlohmann::json;

using Result = hpcrl::test::ShellResult;

// stdout only: commands add " 2>&1" where they need stderr.
Result sh(const std::string& cmd) { return hpcrl::test::run_command(cmd); }

const std::string kMpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                            "mpirun -np 2 --oversubscribe ";
const std::string kEval = std::string(HPCRL_BINARY) + " eval ";

class EvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hpcrl-eval-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // `hpcrl eval ARGS --json`: the document on stdout (logs to stderr, dropped).
  json eval_json(const std::string& args, const std::string& prefix = "") {
    Result r = sh(prefix + kEval + args + " --json 2>/dev/null");
    EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
    return r.status == 0 ? json::parse(r.out) : json();
  }

  std::filesystem::path dir_;
};

TEST_F(EvalCli, ResponsesScoreToHandComputedValues) {
  // Two prompts, two samples each; a blank line 3 keeps line numbers honest.
  const std::string file = write("responses.jsonl",
      "{\"prompt_index\": 0, \"sample_index\": 0, \"response\": \"so \\\\boxed{12}\", \"answer\": \"12\"}\n"
      "{\"prompt_index\": 0, \"sample_index\": 1, \"response\": \"I think 13\", \"answer\": \"12\"}\n"
      "\n"
      "{\"prompt_index\": 1, \"response\": \"<think>add them</think> \\\\boxed{7}\", \"answer\": \"3+4 #### 7\"}\n"
      "{\"prompt_index\": 1, \"response\": \"no idea\", \"answer\": 7}\n");
  json doc = eval_json("--responses " + file + " --format-bonus 0.5");
  EXPECT_EQ(doc["examples"], 2);
  EXPECT_EQ(doc["n"], 2);
  EXPECT_EQ(doc["samples"], 4);
  EXPECT_EQ(doc["correct"], 2);
  // c = 1 of n = 2 for both prompts: pass@1 = 1/2, pass@2 = 1 - C(1,2)/C(2,2) = 1.
  EXPECT_EQ(doc["pass_at_k"], json::parse(R"({"1": 0.5, "2": 1.0})"));
  EXPECT_DOUBLE_EQ(doc["mean_score"].get<double>(), (1.0 + 0.0 + 1.5 + 0.0) / 4);
  const json want = json::parse(R"([
    {"line": 1, "prompt_index": 0, "score": 1.0, "correct": true, "extracted": "12", "extractor": "boxed"},
    {"line": 2, "prompt_index": 0, "score": 0.0, "correct": false, "extracted": "13", "extractor": "last_number"},
    {"line": 4, "prompt_index": 1, "score": 1.5, "correct": true, "extracted": "7", "extractor": "boxed"},
    {"line": 5, "prompt_index": 1, "score": 0.0, "correct": false, "extracted": "", "extractor": ""}])");
  EXPECT_EQ(doc["lines"], want);

  // Without prompt_index every line is its own prompt; the reward spec decides what counts.
  const std::string flat = write("flat.jsonl", "{\"response\": \"answer: 5\", \"answer\": \"5\"}\n"
                                               "{\"response\": \"\\\\boxed{4} or 5\", \"answer\": \"5\"}\n");
  json a = eval_json("--responses " + flat);
  EXPECT_EQ(a["n"], 1);
  EXPECT_EQ(a["pass_at_k"], json::parse(R"({"1": 0.5})"));  // boxed 4 is wrong, "answer: 5" right
  json b = eval_json("--responses " + flat + " --extract last_number");
  EXPECT_EQ(b["pass_at_k"], json::parse(R"({"1": 1.0})"));
  EXPECT_EQ(b["lines"][1]["extracted"], "5");

  // The table names each line and the pass@k rows.
  Result table = sh(kEval + "--responses " + file + " 2>/dev/null");
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("pass@1       50.00 %"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("pass@2      100.00 %"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("4 responses to 2 prompts, 2 correct"), std::string::npos) << table.out;
}

TEST_F(EvalCli, BadLinesExitTwoNamingFileLineAndFix) {
  auto expect_error = [&](const std::string& name, const std::string& text, const std::string& message,
                          const std::string& extra = "") {
    const std::string file = write(name, text);
    Result r = sh(kEval + "--responses " + file + extra + " 2>&1");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(message.find("FILE") == 0 ? file + message.substr(4) : message), std::string::npos)
        << "want: " << message << "\ngot: " << r.out;
  };
  expect_error("broken.jsonl", "{\"response\": \"x\", \"answer\": \"1\"}\n{\"response\": oops}\n",
               "FILE:2:14: invalid JSON (");
  expect_error("broken2.jsonl", "{\"response\": oops}\n",
               "each line must be one JSON object, e.g. {\"response\": \"... \\\\boxed{12}\", \"answer\": \"12\"}");
  expect_error("typo.jsonl", "{\"respons\": \"x\", \"answer\": \"1\"}\n",
               "FILE:1: missing key 'response' (this line has keys: 'answer', 'respons'; did you mean 'respons'?); "
               "every line needs the model's \"response\" and the gold \"answer\", e.g. "
               "{\"response\": \"... \\\\boxed{12}\", \"answer\": \"12\"}");
  expect_error("noanswer.jsonl", "\n\n{\"response\": \"x\"}\n", "FILE:3: missing key 'answer' (this line has keys: "
                                                                "'response');");
  expect_error("array.jsonl", "[1, 2]\n", "FILE:1: expected a JSON object, got array;");
  expect_error("number.jsonl", "{\"response\": 5, \"answer\": \"5\"}\n",
               "FILE:1: key 'response' is number, expected the response text as a string");
  expect_error("mixed.jsonl", "{\"prompt_index\": 0, \"response\": \"1\", \"answer\": \"1\"}\n"
                              "{\"response\": \"1\", \"answer\": \"1\"}\n",
               "FILE:2: line 1 has a prompt_index but line 2 has none; give every line a prompt_index");
  expect_error("negative.jsonl", "{\"prompt_index\": -1, \"response\": \"1\", \"answer\": \"1\"}\n",
               "FILE:1: key 'prompt_index' is -1, expected an integer >= 0");
  expect_error("empty.jsonl", "\n\n", "FILE: no responses (2 lines, all blank)");
  expect_error("ok.jsonl", "{\"response\": \"1\", \"answer\": \"1\"}\n",
               "--responses scores pre-generated responses without a model: drop --model, --data and --tools",
               " --model preset:tiny");
  expect_error("ok2.jsonl", "{\"response\": \"1\", \"answer\": \"1\"}\n", "--extract[0]: ", " --extract boxd");
  Result missing = sh(kEval + "--responses " + path("missing.jsonl") + " 2>&1");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find(path("missing.jsonl")), std::string::npos) << missing.out;
  Result no_model = sh(kEval + "--data synthetic 2>&1");
  EXPECT_EQ(no_model.status, 2);
  EXPECT_NE(no_model.out.find("--model is required"), std::string::npos) << no_model.out;
}

// A saved random tiny model and a dataset whose accuracy under greedy decoding is known.
class EvalModel : public EvalCli {
 protected:
  static constexpr int64_t kMaxNew = 24;

  void SetUp() override {
    EvalCli::SetUp();
    model_dir_ = path("model");
    model::ModelOptions mo;
    mo.seed = 11;
    auto m = model::load_model("preset:tiny", {}, mo);
    model::save_pretrained(*m, model_dir_, /*writer=*/true);
    tok_ = std::shared_ptr<io::Tokenizer>(io::load_tokenizer("builtin"));

    // Greedy answers of the model to each prompt (as eval will build them: BOS + text).
    std::string rows;
    // A random model with tied embeddings tends to repeat the prompt's last token under greedy
    // decoding, so prompts ending in a digit make it write numbers the verifier can extract.
    const std::vector<std::string> questions = {"3*4",   "Count: 1", "99-1",  "5+5= 1", "Total 8", "x=5",
                                                "12+7",  "a 2",      "Sum 6", "n=9",    "7",       "Add 2",
                                                "k 4",   "0+3",      "b 13",  "12+7="};
    for (const auto& q : questions) rows += json({{"question", q}, {"answer", "0"}}).dump() + "\n";
    io::Dataset probe = io::load_jsonl(write("probe.jsonl", rows));
    data_cfg_.kind = config::DataKind::jsonl;
    algo::PromptBuilder pb(*tok_, &data_cfg_);
    std::vector<std::vector<int32_t>> prompts;
    for (const auto& ex : probe.examples) prompts.push_back(pb.prompt_ids(ex));
    rollout::SamplingParams sp;
    sp.temperature = 0;
    sp.max_new_tokens = kMaxNew;
    sp.eos_ids = pb.stop_ids();
    rollout::Engine engine(m, tok_.get());
    auto samples = engine.generate(prompts, 1, sp);
    reward::VerifiableReward last({{reward::Extractor::kLastNumber}});
    rows.clear();
    for (size_t i = 0; i < samples.size(); ++i) {
      std::string found = last.score(tok_->decode(samples[i].tokens, true), "0").extracted;
      const bool right = i % 2 == 0 && !found.empty();
      expected_correct_ += right;
      correct_rows_.push_back(right);
      rows += json({{"question", questions[i]}, {"answer", right ? found : "wrong"}}).dump() + "\n";
    }
    data_ = write("data.jsonl", rows);
    dataset_ = io::load_jsonl(data_);
    model_ = m;
  }

  std::string model_args() const {
    return "--model " + model_dir_ + " --tokenizer builtin --data " + data_ + " --extract last_number --max-new-tokens " +
           std::to_string(kMaxNew);
  }

  std::string model_dir_, data_;
  std::shared_ptr<io::Tokenizer> tok_;
  std::shared_ptr<model::DecoderModel> model_;
  config::DatasetConfig data_cfg_;
  io::Dataset dataset_;
  int64_t expected_correct_ = 0;
  std::vector<bool> correct_rows_;
};

TEST_F(EvalModel, GreedyAccuracyIsKnownAndEqualsAlgoEvaluateOnEveryLayout) {
  ASSERT_GE(expected_correct_, 2) << "the random model should write a number for several prompts";
  const double want = double(expected_correct_) / double(dataset_.size());

  // In process: the stage evaluation path on the same saved model.
  algo::Role role;
  role.name = "policy";
  role.model = model::load_model(model_dir_, {}, {});
  role.tokenizer = tok_;
  algo::PromptBuilder pb(*tok_, &data_cfg_);
  algo::EvalOptions eo;
  eo.max_new_tokens = kMaxNew;
  eo.loss = false;
  algo::EvalResult r = algo::evaluate(role, dataset_, pb, reward::VerifiableReward({{reward::Extractor::kLastNumber}}), eo);
  EXPECT_DOUBLE_EQ(r.accuracy, want);
  ASSERT_EQ(r.correct_per_example.size(), dataset_.size());
  for (size_t i = 0; i < dataset_.size(); ++i) EXPECT_EQ(r.correct_per_example[i], correct_rows_[i] ? 1 : 0) << i;

  json one = eval_json(model_args());
  EXPECT_EQ(one["examples"], int64_t(dataset_.size()));
  EXPECT_EQ(one["n"], 1);
  EXPECT_EQ(one["samples"], int64_t(dataset_.size()));
  EXPECT_EQ(one["correct"], expected_correct_);
  EXPECT_DOUBLE_EQ(one["pass_at_k"]["1"].get<double>(), want);
  EXPECT_EQ(one["pass_at_k"].size(), 1u);
  EXPECT_NEAR(one["mean_response_len"].get<double>(), r.response_len, 1e-12);

  // The model split over two ranks, and the examples split over two replicas (small batches: several calls each).
  for (const std::string layout : {" --tp 2", " --batch 3"}) {
    json two = eval_json(model_args() + layout, kMpirun);
    EXPECT_EQ(two["correct"], expected_correct_) << layout;
    EXPECT_DOUBLE_EQ(two["pass_at_k"]["1"].get<double>(), want) << layout;
  }
}

TEST_F(EvalModel, SampledPassAtKEqualsOfflineScoringOfGenerate) {
  const std::string sampling = " --n 4 --temperature 1.0 --seed 5 --max-new-tokens " + std::to_string(kMaxNew);
  // The dataset's prompts through `hpcrl generate`; sample 0's last number becomes the gold answer of
  // even prompts (so some samples are right), odd prompts get a wrong one.
  std::string prompts;
  for (const auto& ex : dataset_.examples) prompts += json({{"prompt", ex.prompt}}).dump() + "\n";
  Result gen = sh(std::string(HPCRL_BINARY) + " generate --model " + model_dir_ + " --tokenizer builtin --prompts " +
                  write("prompts.jsonl", prompts) + sampling + " --out " + path("gen.jsonl") + " 2>&1");
  ASSERT_EQ(gen.status, 0) << gen.out;
  std::vector<json> samples;
  std::ifstream in(path("gen.jsonl"));
  for (std::string line; std::getline(in, line);) samples.push_back(json::parse(line));
  ASSERT_EQ(samples.size(), 4 * dataset_.size());
  reward::VerifiableReward last({{reward::Extractor::kLastNumber}});
  std::vector<std::string> gold(dataset_.size(), "wrong");
  for (const auto& j : samples) {
    const size_t p = j["prompt_index"].get<size_t>();
    if (p % 2 == 0 && j["sample_index"] == 0) {
      std::string found = last.score(j["response"].get<std::string>(), "0").extracted;
      if (!found.empty()) gold[p] = found;
    }
  }
  std::string rows, responses;
  for (size_t p = 0; p < dataset_.size(); ++p)
    rows += json({{"question", dataset_.examples[p].prompt}, {"answer", gold[p]}}).dump() + "\n";
  std::vector<algo::SampleCounts> counts(dataset_.size(), {4, 0});
  for (auto j : samples) {
    const size_t p = j["prompt_index"].get<size_t>();
    counts[p].correct += last.score(j["response"].get<std::string>(), gold[p]).correct;
    j["answer"] = gold[p];
    responses += j.dump() + "\n";
  }
  const auto want = algo::mean_pass_at_k(counts);
  ASSERT_GT(want.at(1), 0.0) << "the model should write a number in some samples";

  json online = eval_json("--model " + model_dir_ + " --tokenizer builtin --data " + write("sampled.jsonl", rows) +
                          " --extract last_number" + sampling);
  json offline = eval_json("--responses " + write("scored.jsonl", responses) + " --extract last_number");
  ASSERT_EQ(online["pass_at_k"].size(), 3u);  // k = 1, 2, 4
  ASSERT_EQ(offline["pass_at_k"].size(), 3u);
  EXPECT_EQ(online["samples"], int64_t(4 * dataset_.size()));
  EXPECT_EQ(offline["samples"], online["samples"]);
  EXPECT_EQ(offline["correct"], online["correct"]);
  for (int64_t k : {1, 2, 4}) {
    const std::string key = std::to_string(k);
    EXPECT_DOUBLE_EQ(online["pass_at_k"][key].get<double>(), want.at(k)) << k;
    EXPECT_DOUBLE_EQ(offline["pass_at_k"][key].get<double>(), want.at(k)) << k;
  }
  EXPECT_GT(want.at(4), want.at(1));  // more draws find more right answers
}

}  // namespace
