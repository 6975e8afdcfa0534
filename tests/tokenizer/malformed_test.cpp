// Malformed or unsupported tokenizer files are InputErrors (exit 2) that name
// the file, the place in it, what is wrong and the fix.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

using nlohmann::json;

// Loads `text` as DIR/tokenizer.json and returns the InputError message.
std::string load_error(const std::string& text, const std::string& config = "") {
  testing::TempDir dir;
  dir.write("tokenizer.json", text);
  if (!config.empty()) dir.write("tokenizer_config.json", config);
  try {
    load_tokenizer(dir.path.string());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

TEST(Malformed, BadJsonNamesLineAndColumn) {
  std::string msg = load_error("{\n  \"model\": {\n    \"type\": \"BPE\",,\n");
  EXPECT_HAS(msg, "tokenizer.json:3:");
  EXPECT_HAS(msg, "invalid JSON");
  EXPECT_HAS(msg, "download it again");
}

TEST(Malformed, NumberBeyondADoubleNamesLineAndColumn) {
  // Line 2 is `"version": 1e999}`; the number starts at column 12.
  std::string msg = load_error("{\n\"version\": 1e999}\n");
  EXPECT_HAS(msg, "tokenizer.json:2:12: invalid JSON (number 1e999 is beyond the range of a double");
}

TEST(Malformed, MissingModel) {
  json j = testing::tiny_tokenizer_json({});
  j.erase("model");
  std::string msg = load_error(j.dump());
  EXPECT_HAS(msg, "tokenizer.json: model: missing");
  EXPECT_HAS(msg, "byte-level BPE");
}

TEST(Malformed, UnsupportedModelTypes) {
  for (std::string type : {"Unigram", "WordPiece", "WordLevel"}) {
    json j = testing::tiny_tokenizer_json({});
    j["model"]["type"] = type;
    std::string msg = load_error(j.dump());
    EXPECT_HAS(msg, "model.type: model type '" + type + "' is not supported");
    EXPECT_HAS(msg, "hpcrl supports byte-level BPE");
  }
}

TEST(Malformed, MergeWithUnknownToken) {
  json j = testing::tiny_tokenizer_json({"a b"});
  j["model"]["merges"].push_back("ab zz");
  std::string msg = load_error(j.dump());
  EXPECT_HAS(msg, "model.merges[1]: merge \"ab zz\" uses token 'zz', which is not in model.vocab");
  EXPECT_HAS(msg, "different files");
  // The pair format, and a merge whose result is missing.
  j = testing::tiny_tokenizer_json({});
  j["model"]["merges"] = json::array({json::array({"x", "y"})});
  EXPECT_HAS(load_error(j.dump()), "model.merges[0]: merge [\"x\",\"y\"] uses token 'xy'");
  j["model"]["merges"] = json::array({"x y z"});
  EXPECT_HAS(load_error(j.dump()), "model.merges[0]: merge \"x y z\" is not two tokens separated by one space");
}

TEST(Malformed, BadRegex) {
  json j = testing::tiny_tokenizer_json({});
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "(?i:'s|[\\p{L}+"}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  std::string msg = load_error(j.dump());
  EXPECT_HAS(msg, "pre_tokenizer.pretokenizers[0].pattern.Regex: the regex does not compile: ");
  EXPECT_HAS(msg, "at pattern offset");
}

TEST(Malformed, NotByteLevel) {
  json j = testing::tiny_tokenizer_json({});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  EXPECT_HAS(load_error(j.dump()), "pre_tokenizer.type: pre-tokenizer 'Metaspace' is not supported");
  j = testing::tiny_tokenizer_json({});
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}}}}};
  EXPECT_HAS(load_error(j.dump()), "normalizer.normalizers[0].type: normalizer 'Prepend' is not supported");
  j = testing::tiny_tokenizer_json({});
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "ByteLevel"}, {"add_prefix_space", false}},
                                           {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}}}}};
  EXPECT_HAS(load_error(j.dump()), "pre_tokenizer.pretokenizers[0]: ByteLevel is not the last pre-tokenizer step");
  j = testing::tiny_tokenizer_json({});
  j["model"]["vocab"].erase("Ġ");
  EXPECT_HAS(load_error(j.dump()), "model.vocab: has no token for byte 32 ('Ġ')");
}

TEST(Malformed, BadValues) {
  json j = testing::tiny_tokenizer_json({});
  j["model"]["vocab"]["Ġ"] = "32";
  EXPECT_HAS(load_error(j.dump()), "model.vocab.Ġ: token id \"32\" is not an integer");
  j = testing::tiny_tokenizer_json({});
  j["model"]["vocab"]["zz"] = 5;
  EXPECT_HAS(load_error(j.dump()), ": id 5 is also used by");
  j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {{{"content", "<x>"}}};
  EXPECT_HAS(load_error(j.dump()), "added_tokens[0].id: missing");
}

TEST(Malformed, ConfigNamesUnknownToken) {
  json j = testing::tiny_tokenizer_json({});
  std::string msg = load_error(j.dump(), R"({"eos_token": "<|im_end|>"})");
  EXPECT_HAS(msg, "tokenizer_config.json: eos_token: token '<|im_end|>' is not in");
  EXPECT_HAS(load_error(j.dump(), "{\"eos_token\": "), "tokenizer_config.json:1:");
}

TEST(Malformed, MissingPaths) {
  try {
    load_tokenizer("/nonexistent/tok");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_HAS(std::string(e.what()), "tokenizer '/nonexistent/tok' does not exist: pass a directory");
  }
  testing::TempDir dir;
  dir.write("vocab.json", "{}");
  try {
    load_tokenizer(dir.path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_HAS(std::string(e.what()), "has no tokenizer.json (only the slow-tokenizer files are there");
  }
}

}  // namespace
}  // namespace hpcrl::io
