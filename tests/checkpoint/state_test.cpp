// state.json and complete.json read back on --resume: valid files parse,
// every damaged or edited value is an error naming the file and the key.
#include <gtest/gtest.h>

#include "hpcrl/io/checkpoint_state.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;

namespace {
std::string state_error(const std::string& text) {
  try {
    io::parse_checkpoint_state(text, "S");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(CheckpointState, AStateWrittenByAStageParses) {
  auto s = io::parse_checkpoint_state(
      R"({"step": 20, "cursor": {"epoch": 1, "index": 3, "seed": 1, "size": 64}, "layout": {"policy": {"tp": 1}}, "rng": [0, 255]})",
      "S");
  EXPECT_EQ(s["step"].get<int64_t>(), 20);
}

TEST(CheckpointState, StepMustBeANonNegativeInteger) {
  EXPECT_NE(state_error(R"({"step": -3})").find("S: \"step\" must be a non-negative integer, got -3"), std::string::npos);
  EXPECT_NE(state_error(R"({"step": 2.5})").find("got 2.5"), std::string::npos);
  EXPECT_NE(state_error(R"({"cursor": {}})").find("got nothing"), std::string::npos);
  // 2^63 does not fit the int64 a step is counted in.
  EXPECT_NE(state_error(R"({"step": 9223372036854775808})").find("must be a non-negative integer"), std::string::npos);
}

TEST(CheckpointState, DamagedPartsAreNamed) {
  EXPECT_NE(state_error("[1]").find("S: expected a JSON object, got array"), std::string::npos);
  EXPECT_NE(state_error(R"({"step": 1, "layout": [1]})").find("\"layout\" must be an object"), std::string::npos);
  EXPECT_NE(state_error(R"({"step": 1, "rng": [1, 256]})").find("\"rng\" must be a list of bytes"), std::string::npos);
  EXPECT_NE(state_error(R"({"step": 1, "cursor": {"epoch": 0, "index": 9, "seed": 1, "size": 4}})")
                .find("data cursor index 9 is outside the dataset of size 4"),
            std::string::npos);
  EXPECT_NE(state_error("{\"step\":\n 1e999}").find("S:2:2: not valid JSON (number 1e999 is beyond"), std::string::npos);
}

TEST(StageRecord, StepsAndAccuracyAreRead) {
  io::StageRecord r = io::parse_stage_record(R"({"steps": 40, "eval_accuracy": 0.5, "seconds": 3})", "C");
  EXPECT_EQ(r.steps, 40);
  EXPECT_DOUBLE_EQ(r.eval_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(io::parse_stage_record(R"({"steps": 0})", "C").eval_accuracy, -1.0);  // not measured
  EXPECT_THROW(io::parse_stage_record(R"({"steps": "40"})", "C"), InputError);
}
