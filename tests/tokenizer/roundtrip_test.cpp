// encode → decode returns the exact text for every tokenizer on a corpus of
// multilingual text, emoji (incl. ZWJ sequences), code, and odd whitespace;
// and NFC normalisation (Qwen) is visible where declared.
#include <gtest/gtest.h>

#include <thread>

#include "hpcrl/io/tokenizer_byte.h"
#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = {
      "",
      "Hello, world!",
      "The quick brown fox jumps over the lazy dog. 1234567890",
      "Grüße aus Köln — naïve café, Ærøskøbing, Ådalen",
      "Привет, как дела? Съешь же ещё этих мягких французских булок.",
      "日本語のテキストと中文文本，还有한국어 문장도 있습니다。",
      "مرحبا بالعالم — שלום עולם",
      "हिन्दी पाठ, ภาษาไทย, ქართული, Ελληνικά",
      "emoji: 😀😃🙂 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 ✅ 🇫🇷 🦙",
      "int main(int argc, char** argv) {\n\tfor (int i = 0; i < argc; ++i) printf(\"%s\\n\", argv[i]);\n}\n",
      "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n\n\n",
      "   leading and trailing spaces   ",
      "tabs\tand\t\tmixed \t \n\r\n\r newlines\n\n\n\n",
      "\xc2\xa0non-breaking\xe2\x80\x83" "em-space\xe3\x80\x80ideographic\xe2\x80\xa8line-sep",
      "numbers 3.14159 1e-10 1,000,000 ½ ⅞ ٣٤٥ 〇一二",
      "\\boxed{42} and $x^2 + y^2 = z^2$ \\frac{a}{b}",
      "zero-width\xe2\x80\x8bjoiner\xe2\x80\x8d and a lone combining mark e\xcc\x81",
      "control \x01\x02\x7f chars and NUL-free bytes",
      "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
      std::string(300, ' ') + std::string(100, '\n') + std::string(50, 'a'),
  };
  return texts;
}

void check_round_trip(const Tokenizer& tok, bool normalizes_nfc) {
  for (const auto& text : corpus()) {
    auto ids = tok.encode(text);
    std::string back = tok.decode(ids);
    // "e\u0301" is the only non-NFC text in the corpus; NFC composes it to "é".
    bool composed = normalizes_nfc && text.find("e\xcc\x81") != std::string::npos;
    std::string expected = text;
    if (composed) expected.replace(expected.find("e\xcc\x81"), 3, "\xc3\xa9");
    EXPECT_EQ(back, expected) << tok.source() << ": " << nlohmann::json(text).dump();
    for (int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, tok.vocab_size());
    }
  }
}

TEST(RoundTrip, Qwen3) { check_round_trip(testing::fixture_tokenizer("qwen3"), true); }
TEST(RoundTrip, Llama3) { check_round_trip(testing::fixture_tokenizer("llama3"), false); }
TEST(RoundTrip, Builtin) { check_round_trip(ByteTokenizer(), false); }

TEST(RoundTrip, ConcurrentEncodesMatchSerial) {
  // One tokenizer shared by threads (data loaders, rollout workers): the word
  // cache and the per-thread regex state must not mix results.
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  std::vector<std::vector<int32_t>> serial;
  for (const auto& text : corpus()) serial.push_back(tok.encode(text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < corpus().size(); ++i)
          if (tok.encode(corpus()[(i + t) % corpus().size()]) != serial[(i + t) % corpus().size()]) ++mismatches[t];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(RoundTrip, PiecesConcatenateToByteLevelText) {
  const Tokenizer& tok = testing::fixture_tokenizer("llama3");
  auto ids = tok.encode("Hello world\n");
  EXPECT_EQ(tok.pieces(ids), (std::vector<std::string>{"Hello", "Ġworld", "Ċ"}));
}

TEST(RoundTrip, TruncatedCharacterDecodesToReplacement) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  // "𓀀" (U+13000, 4 bytes) is not one Qwen token, so dropping its last id cuts the character.
  auto ids = tok.encode("a𓀀");
  ASSERT_GE(ids.size(), 3u);
  std::vector<int32_t> cut(ids.begin(), ids.end() - 1);
  std::string text = tok.decode(cut);
  EXPECT_EQ(text.substr(0, 1), "a");
  EXPECT_EQ(text.substr(1), "\xef\xbf\xbd");  // one U+FFFD for the incomplete sequence
}

TEST(RoundTrip, InvalidUtf8InputIsAnInputError) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  try {
    tok.encode("ok\xff\xfe");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte offset 2)"), std::string::npos) << e.what();
  }
}

TEST(RoundTrip, UnknownIdsAreSkippedInDecode) {
  const Tokenizer& tok = testing::fixture_tokenizer("qwen3");
  auto ids = tok.encode("hi");
  std::vector<int32_t> padded = ids;
  padded.push_back(151900);  // a padded embedding row of Qwen3 (vocab 151936) with no token
  padded.push_back(-1);
  EXPECT_EQ(tok.decode(padded), "hi");
  EXPECT_EQ(tok.id_to_token(151900), "");
}

}  // namespace
}  // namespace hpcrl::io
