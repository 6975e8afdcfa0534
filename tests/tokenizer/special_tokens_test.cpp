// Added and special tokens: matched before BPE as single ids (leftmost,
// longest), their lstrip/rstrip/single_word/normalized flags, special-token
// skipping in decode, bos/eos/pad from tokenizer_config.json, and what
// add_special adds (TemplateProcessing, add_bos_token).
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

using nlohmann::json;

json added(int id, const std::string& content, bool special, json flags = json::object()) {
  json a = {{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},    {"normalized", false}, {"special", special}};
  for (auto& [k, v] : flags.items()) a[k] = v;
  return a;
}

TEST(SpecialTokens, Qwen3SpecialAndThinkTokensAreSingleIds) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  EXPECT_EQ(tok.encode("<|im_start|>"), std::vector<int32_t>{151644});
  EXPECT_EQ(tok.encode("<|im_end|>"), std::vector<int32_t>{151645});
  EXPECT_EQ(tok.encode("<|endoftext|>"), std::vector<int32_t>{151643});
  EXPECT_EQ(tok.encode("<think>"), std::vector<int32_t>{151667});
  EXPECT_EQ(tok.encode("</think>"), std::vector<int32_t>{151668});
  // In running text, with no space absorbed on either side.
  EXPECT_EQ(tok.encode("Hello<|im_end|>\n"), (std::vector<int32_t>{9707, 151645, 198}));
  EXPECT_EQ(tok.token_to_id("<think>"), 151667);
  EXPECT_EQ(tok.id_to_token(151644), "<|im_start|>");
  EXPECT_TRUE(tok.is_special(151644));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is an added, non-special token in Qwen3
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.eos_id(), 151645);
  EXPECT_EQ(tok.pad_id(), 151643);
  // Qwen3 declares no BOS/EOS around a sequence.
  EXPECT_EQ(tok.encode("Hello", true), std::vector<int32_t>{9707});
}

TEST(SpecialTokens, SkipSpecialKeepsThinkTags) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  auto ids = tok.encode("<|im_start|>assistant\n<think>\nhmm\n</think>\n\n42<|im_end|>");
  EXPECT_EQ(tok.decode(ids), "<|im_start|>assistant\n<think>\nhmm\n</think>\n\n42<|im_end|>");
  EXPECT_EQ(tok.decode(ids, true), "assistant\n<think>\nhmm\n</think>\n\n42");
}

TEST(SpecialTokens, Llama3) {
  const Tokenizer& tok = testing::fixture_tokenizer("llama3");
  EXPECT_EQ(tok.encode("<|begin_of_text|>"), std::vector<int32_t>{128000});
  EXPECT_EQ(tok.encode("<|start_header_id|>user<|end_header_id|>"), (std::vector<int32_t>{128006, 882, 128007}));
  EXPECT_EQ(tok.encode("<|eot_id|>"), std::vector<int32_t>{128009});
  EXPECT_EQ(tok.encode("<|reserved_special_token_5|>"), std::vector<int32_t>{128010});
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_id(), 128001);
  EXPECT_EQ(tok.pad_id(), -1);
  EXPECT_EQ(tok.vocab_size(), 128256);
  // This (original) Llama-3 tokenizer.json has a ByteLevel post-processor and no
  // add_bos_token, so HF adds nothing; neither do we.
  EXPECT_EQ(tok.encode("Hello", true), std::vector<int32_t>{9906});
}

TEST(SpecialTokens, LeftmostLongestMatch) {
  json j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {added(256, "<a>", true), added(257, "<a><b>", true), added(258, "b>", false)};
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  EXPECT_EQ(tok->encode("x<a><b>y"), (std::vector<int32_t>{'x', 257, 'y'}));
  EXPECT_EQ(tok->encode("<a><c>"), (std::vector<int32_t>{256, '<', 'c', '>'}));
  // Text before the leftmost match stays plain text.
  EXPECT_EQ(tok->encode("ab>"), (std::vector<int32_t>{'a', 258}));
}

TEST(SpecialTokens, LstripRstripAbsorbWhitespace) {
  json j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {added(256, "<mask>", true, {{"lstrip", true}}), added(257, "<sep>", true, {{"rstrip", true}})};
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  // "a  <mask> b": the two spaces before <mask> belong to it, the one after does not.
  EXPECT_EQ(tok->encode("a  <mask> b"), (std::vector<int32_t>{'a', 256, ' ', 'b'}));
  EXPECT_EQ(tok->encode("a <sep>  b"), (std::vector<int32_t>{'a', ' ', 257, 'b'}));
}

TEST(SpecialTokens, SingleWordNeedsWordBoundaries) {
  json j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {added(256, "cat", false, {{"single_word", true}})};
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  EXPECT_EQ(tok->encode("a cat!"), (std::vector<int32_t>{'a', ' ', 256, '!'}));
  EXPECT_EQ(tok->encode("concat"), (std::vector<int32_t>{'c', 'o', 'n', 'c', 'a', 't'}));
}

TEST(SpecialTokens, NormalizedTokenMatchesAfterNfc) {
  json j = testing::tiny_tokenizer_json({});
  j["normalizer"] = {{"type", "NFC"}};
  j["added_tokens"] = {added(256, "caf\xc3\xa9", false, {{"normalized", true}})};
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  // "cafe" + U+0301 composes to "café" before added tokens declared normalized are matched.
  EXPECT_EQ(tok->encode("cafe\xcc\x81!"), (std::vector<int32_t>{256, '!'}));
}

TEST(SpecialTokens, TemplateProcessingAddsBosAndEos) {
  json j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {added(256, "<s>", true), added(257, "</s>", true)};
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                     {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
         {"pair", json::array()},
         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}},
                             {"</s>", {{"id", "</s>"}, {"ids", {257}}, {"tokens", {"</s>"}}}}}}}}}};
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  EXPECT_EQ(tok->encode("hi", true), (std::vector<int32_t>{256, 'h', 'i', 257}));
  EXPECT_EQ(tok->encode("hi", false), (std::vector<int32_t>{'h', 'i'}));
}

TEST(SpecialTokens, AddBosTokenFromConfig) {
  json j = testing::tiny_tokenizer_json({});
  j["added_tokens"] = {added(256, "<bos>", true), added(257, "<eos>", true)};
  testing::TempDir dir;
  dir.write("tokenizer.json", j.dump());
  dir.write("tokenizer_config.json",
            json{{"bos_token", "<bos>"}, {"eos_token", {{"content", "<eos>"}}}, {"add_bos_token", true}}.dump());
  auto tok = load_tokenizer(dir.path.string());
  EXPECT_EQ(tok->bos_id(), 256);
  EXPECT_EQ(tok->eos_id(), 257);
  EXPECT_EQ(tok->encode("x", true), (std::vector<int32_t>{256, 'x'}));
}

}  // namespace
}  // namespace hpcrl::io
