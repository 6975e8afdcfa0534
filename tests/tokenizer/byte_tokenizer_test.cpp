// The built-in byte tokenizer: one id per byte, fixed special ids, printable pieces.
#include <gtest/gtest.h>

#include "hpcrl/io/tokenizer_byte.h"
#include "tokenizer_test_util.h"

namespace hpcrl::io {
namespace {

TEST(ByteTokenizer, BytesAndSpecials) {
  auto tok = load_tokenizer("builtin");
  EXPECT_EQ(tok->vocab_size(), 263);
  EXPECT_EQ(tok->encode("hi"), (std::vector<int32_t>{'h', 'i'}));
  EXPECT_EQ(tok->encode("hi", true), (std::vector<int32_t>{ByteTokenizer::kBos, 'h', 'i'}));
  EXPECT_EQ(tok->encode("é"), (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_EQ(tok->encode("<|im_start|>user\n<think>x</think><|im_end|><|eos|>"),
            (std::vector<int32_t>{259, 'u', 's', 'e', 'r', '\n', 261, 'x', 262, 260, 257}));
  EXPECT_EQ(tok->encode("<|im_star"), (std::vector<int32_t>{'<', '|', 'i', 'm', '_', 's', 't', 'a', 'r'}));
  EXPECT_EQ(tok->bos_id(), 256);
  EXPECT_EQ(tok->eos_id(), 257);
  EXPECT_EQ(tok->pad_id(), 258);
}

TEST(ByteTokenizer, PiecesDecodeAndLookup) {
  auto tok = load_tokenizer("builtin");
  EXPECT_EQ(tok->pieces({' ', '\n', 'a', 260}), (std::vector<std::string>{"Ġ", "Ċ", "a", "<|im_end|>"}));
  EXPECT_EQ(tok->token_to_id("Ġ"), ' ');
  EXPECT_EQ(tok->token_to_id("<think>"), ByteTokenizer::kThink);
  EXPECT_EQ(tok->token_to_id("ab"), -1);
  EXPECT_EQ(tok->decode({256, 'o', 'k', 261, 257}), "<|bos|>ok<think><|eos|>");
  EXPECT_EQ(tok->decode({256, 'o', 'k', 261, 257}, true), "ok<think>");
  EXPECT_TRUE(tok->is_special(ByteTokenizer::kImStart));
  EXPECT_FALSE(tok->is_special(ByteTokenizer::kThink));
  EXPECT_FALSE(tok->is_special('a'));
}

}  // namespace
}  // namespace hpcrl::io
