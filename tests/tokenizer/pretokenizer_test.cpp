// The pieces under the tokenizers: PCRE2 pre-tokenizer splits (checked
// against Python's `regex` module on the same patterns), the BPE merge order
// (lowest rank first, leftmost on ties), ignore_merges, and UTF-8 handling.
#include <gtest/gtest.h>

#include "io/tokenizer_pretokenizer.h"
#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

using nlohmann::json;

std::vector<std::string> split(const json& pre, const std::string& text) {
  PreTokenizer p = PreTokenizer::from_json(pre, {"test", "pre_tokenizer"});
  std::vector<std::string> out;
  p.split(text, &out);
  return out;
}

TEST(PreTokenizer, Gpt2ByteLevelRegex) {
  json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  // regex.findall(gpt2_pattern, text) in Python.
  EXPECT_EQ(split(pre, "Hello world's 123  foo!!\n\n  x"),
            (std::vector<std::string>{"Hello", " world", "'s", " 123", " ", " foo", "!!", "\n\n ", " x"}));
  json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(split(prefixed, "Hi"), (std::vector<std::string>{" Hi"}));
}

TEST(PreTokenizer, Llama3SplitRegex) {
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"},
                 {"pattern",
                  {{"Regex",
                    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(split(pre, "I'VE 12345 apples!!\n\n  x"),
            (std::vector<std::string>{"I", "'VE", " ", "123", "45", " apples", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split(pre, ""), std::vector<std::string>{});
}

TEST(PreTokenizer, RemovedBehaviorDropsMatches) {
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"String", "--"}}}, {"behavior", "Removed"}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(split(pre, "a--b----c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Bpe, LowestRankFirstLeftmostOnTies) {
  // Ranks: "b c" (0) before "a b" (1): "abc" → "a" "bc", never "ab" "c".
  json j = testing::tiny_tokenizer_json({"b c", "a b", "a a"});
  j["pre_tokenizer"]["use_regex"] = false;
  testing::TempDir dir;
  auto tok = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  int32_t bc = tok->token_to_id("bc"), aa = tok->token_to_id("aa");
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{'a', bc}));
  EXPECT_EQ(tok->encode("aaa"), (std::vector<int32_t>{aa, 'a'}));  // leftmost pair merges first
  EXPECT_EQ(tok->encode("aaaa"), (std::vector<int32_t>{aa, aa}));
}

TEST(Bpe, IgnoreMergesEmitsWholeVocabWords) {
  // "abcd" is in the vocab but unreachable by merges.
  json j = testing::tiny_tokenizer_json({"a b"}, {"abcd"});
  j["pre_tokenizer"]["use_regex"] = false;
  testing::TempDir dir;
  auto plain = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  int32_t ab = plain->token_to_id("ab"), abcd = plain->token_to_id("abcd");
  EXPECT_EQ(plain->encode("abcd"), (std::vector<int32_t>{ab, 'c', 'd'}));
  j["model"]["ignore_merges"] = true;
  auto ignoring = load_tokenizer(dir.write("tokenizer.json", j.dump()));
  EXPECT_EQ(ignoring->encode("abcd"), std::vector<int32_t>{abcd});
  EXPECT_EQ(ignoring->encode("abcdx"), (std::vector<int32_t>{ab, 'c', 'd', 'x'}));
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(bytes::utf8_lossy("a\xe2\x82"), "a\xef\xbf\xbd");                             // truncated 3-byte
  EXPECT_EQ(bytes::utf8_lossy("\xf0\x80\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");   // overlong: 3 × U+FFFD
  EXPECT_EQ(bytes::utf8_lossy("\xed\xa0\x80x"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx"); // surrogate
  EXPECT_EQ(bytes::utf8_lossy("ok \xf0\x9f\x98\x80"), "ok \xf0\x9f\x98\x80");
  EXPECT_EQ(bytes::utf8_invalid_offset("ab\xc3"), 2u);
  EXPECT_EQ(bytes::utf8_invalid_offset("ab\xc3\xa9"), std::string::npos);
}

TEST(Utf8, ByteCharactersAreGpt2s) {
  const auto& t = bytes::byte_to_unicode();
  EXPECT_EQ(t[' '], "Ġ");
  EXPECT_EQ(t['\n'], "Ċ");
  EXPECT_EQ(t['A'], "A");
  EXPECT_EQ(t[0], "Ā");
  EXPECT_EQ(t[0xAD], "Ń");
  std::string raw;
  ASSERT_TRUE(bytes::unicode_to_bytes("ĠhelloĊ", &raw));
  EXPECT_EQ(raw, " hello\n");
  EXPECT_FALSE(bytes::unicode_to_bytes("日", &raw));
}

}  // namespace

// (a+)+$ on 40 "a"s and a "!" tries 2^40 ways before failing: PCRE2 stops at its match limit. Before,
// that was a bare "check failed" naming neither the tokenizer file nor the pattern.
TEST(PreTokenizerRegex, AMatchThatBacktracksTooFarNamesTheTokenizerAndThePattern) {
  std::string error;
  auto re = Regex::compile("(a+)+$", false, &error, "tok/tokenizer.json: pre_tokenizer.pattern.Regex");
  ASSERT_TRUE(re) << error;
  try {
    re->find_all(std::string(40, 'a') + "!");
    FAIL() << "expected the match limit";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tok/tokenizer.json: pre_tokenizer.pattern.Regex: the pre-tokenizer regex failed on a text of "
                     "41 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("backtracks too far"), std::string::npos) << m;
  }
}

}  // namespace hpcrl::io
