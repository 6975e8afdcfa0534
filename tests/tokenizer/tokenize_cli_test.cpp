// `hpcrl tokenize`: --json prints exactly one {"ids", "pieces"} document on
// stdout; a bad tokenizer path exits 2 with the error on stderr.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int status;
  std::string out;
};

// Runs the hpcrl binary with `args` (shell-quoted by the caller); stderr is dropped.
Result run(const std::string& args) {
  std::string cmd = std::string(HPCRL_BINARY) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

const std::string kQwen3 = std::string(HPCRL_DATA_DIR) + "/tokenizers/qwen3";

TEST(TokenizeCli, JsonIdsAndPieces) {
  Result r = run("tokenize --tokenizer " + kQwen3 + " --text 'Hello world<|im_end|>' --json");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "{\"ids\":[9707,1879,151645],\"pieces\":[\"Hello\",\"Ġworld\",\"<|im_end|>\"]}\n");
  auto doc = nlohmann::json::parse(r.out);  // exactly one document
  EXPECT_EQ(doc.size(), 2u);
}

TEST(TokenizeCli, BuiltinWithSpecial) {
  Result r = run("tokenize --tokenizer builtin --text 'a b' --special --json");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "{\"ids\":[256,97,32,98],\"pieces\":[\"<|bos|>\",\"a\",\"Ġ\",\"b\"]}\n");
}

TEST(TokenizeCli, TableOutput) {
  Result r = run("tokenize --tokenizer builtin --text 'a\nb'");  // a real newline inside the quotes
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("     0       97 \"a\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     1       10 \"Ċ\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 tokens, 3 bytes"), std::string::npos) << r.out;
}

TEST(TokenizeCli, MissingTokenizerExitsTwo) {
  Result r = run("tokenize --tokenizer /nonexistent/tok --text x --json");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");  // nothing on stdout for scripts to misread
}

}  // namespace
