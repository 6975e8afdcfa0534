// `hpcrl validate` as a user runs it: the built executable (HPCRL_BINARY) on
// shipped and broken pipelines; exit status 0 with a summary on stdout, or 2
// with every error as `error: file:line:col: key.path: message; fix` on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace std::string_literals;

namespace {

namespace stdfs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const stdfs::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs `hpcrl ARGS` from the repository root; stdout and stderr captured apart.
Result hpcrl(const std::string& args) {
  stdfs::path dir = stdfs::temp_directory_path() / ("hpcrl_cli_" + std::to_string(::getpid()));
  stdfs::create_directories(dir);
  std::string cmd = "cd '"s + HPCRL_SOURCE_DIR + "' && '" + HPCRL_BINARY + "' " + args + " >'" +
                    (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  int raw = std::system(cmd.c_str());
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  stdfs::remove_all(dir);
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ValidateCli, ValidPipelinePrintsSummary) {
  Result r = hpcrl("validate configs/quickstart.yaml --world 2");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "configs/quickstart.yaml: valid")) << r.out;
  EXPECT_TRUE(has(r.out, "0. sft      policy on arith")) << r.out;
  EXPECT_TRUE(has(r.out, "2. distill  policy -> student on arith")) << r.out;
  EXPECT_TRUE(has(r.out, "ranks needed: a multiple of 1 (checked for --world 2)")) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(ValidateCli, BadPipelineExitsTwoWithEveryError) {
  Result r = hpcrl("validate tests/config/bad/many_errors.yaml");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(has(r.err, "error: tests/config/bad/many_errors.yaml:"));
  EXPECT_TRUE(has(r.err, "stages[0].sft.stepz: unknown key 'stepz'; did you mean 'steps'?")) << r.err;
  EXPECT_TRUE(has(r.err, "3 errors in tests/config/bad/many_errors.yaml")) << r.err;
}

TEST(ValidateCli, SetOverridesAreValidated) {
  Result ok = hpcrl("validate --set stages[0].sft.steps=5 configs/quickstart.yaml --set run.seed=9");
  EXPECT_EQ(ok.status, 0) << ok.err;
  Result bad = hpcrl("validate configs/quickstart.yaml --set stages[0].sft.stepz=5");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(has(bad.err, "error: --set stages[0].sft.stepz=5: stages[0].sft.stepz: unknown key 'stepz'; did you "
                           "mean 'steps'?"))
      << bad.err;
}

TEST(ValidateCli, WorldSizeChecksLayouts) {
  Result r = hpcrl("validate configs/quickstart.yaml --world 3 --set models.policy.parallel.tp=2");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.err, "models.policy.parallel: role 'policy': tp·sp·pp = 2·1·1 = 2 does not divide the role's 3 "
                         "ranks"))
      << r.err;
}

TEST(ValidateCli, MissingWeightsAreAWarning) {
  Result r = hpcrl("validate configs/gsm8k-qwen2.5-1.5b-perlmutter.yaml --world 8");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.err, "warning: configs/gsm8k-qwen2.5-1.5b-perlmutter.yaml:")) << r.err;
  EXPECT_TRUE(has(r.err, "no weights in 'configs/models/qwen2.5-1.5b'")) << r.err;
}

TEST(ValidateCli, FilesThatAreNotPipelines) {
  Result dir = hpcrl("validate configs");
  EXPECT_EQ(dir.status, 2);
  EXPECT_TRUE(has(dir.err, "error: configs: is a directory, not a pipeline file")) << dir.err;
  Result missing = hpcrl("validate configs/nope.yaml");
  EXPECT_EQ(missing.status, 2);
  EXPECT_TRUE(has(missing.err, "error: configs/nope.yaml: no such file")) << missing.err;
  Result binary = hpcrl("validate '" + std::string(HPCRL_BINARY) + "'");
  EXPECT_EQ(binary.status, 2);
  EXPECT_TRUE(has(binary.err, "is not a text file (NUL byte at offset")) << binary.err;
  // An endless device is read no further than the bound (it used to end in std::bad_alloc).
  Result zeros = hpcrl("validate /dev/zero");
  EXPECT_EQ(zeros.status, 2);
  EXPECT_TRUE(has(zeros.err, "error: /dev/zero: is not a text file (NUL byte at offset 0)")) << zeros.err;
  const std::string big = testing::TempDir() + "/big.yaml";
  std::ofstream(big) << "# " << std::string(2 << 20, 'x') << "\n";
  Result huge = hpcrl("validate " + big);
  EXPECT_EQ(huge.status, 2);
  EXPECT_TRUE(has(huge.err, "is larger than 1 MiB, far more than a pipeline")) << huge.err;
}

TEST(ValidateCli, UsageErrorsExitTwo) {
  EXPECT_EQ(hpcrl("validate").status, 2);
  EXPECT_EQ(hpcrl("validate configs/quickstart.yaml --world -1").status, 2);
  EXPECT_EQ(hpcrl("validate configs/quickstart.yaml --wrld 2").status, 2);
}

}  // namespace
