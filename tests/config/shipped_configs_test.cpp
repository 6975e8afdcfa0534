// The pipelines in configs/ work from a clone alone: each validates at the world
// size it is written for, its only warnings are model folders whose weights the
// user downloads (configs/models/README.md says from where), and every file of
// the tree that it or a slurm/ script names (data, scripts, other configs) exists.
// Run from the source root, which in CI is a copy with nothing beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/shell.h"

namespace {

namespace stdfs = std::filesystem;
const stdfs::path kRoot = HPCRL_SOURCE_DIR;

struct ShippedConfig {
  std::string file;  // relative to the repository root
  int world;         // the world size its header comment is written for
};

// One row per file in configs/: a new pipeline fails TableListsEveryConfig until it is added.
const std::vector<ShippedConfig> kShipped = {
    {"configs/quickstart.yaml", 1},
    {"configs/ci-smoke-1gpu.yaml", 1},
    {"configs/gsm8k-qwen2.5-1.5b-perlmutter.yaml", 8},
    {"configs/ppo-disaggregated-4rank.yaml", 4},
    {"configs/quickstart-disaggregated.yaml", 2},
    {"configs/quickstart-async.yaml", 2},
    {"configs/quickstart-tools.yaml", 1},
    {"configs/gsm8k-qwen2.5-1.5b-perlmutter-async.yaml", 8},
    // Published runs described for the cost model (docs/estimates.md); never run by hpcrl.
    {"configs/published/nemo-rl-llama3.1-8b-grpo-16xh100.yaml", 16},
    {"configs/published/nemo-rl-llama3.1-8b-grpo-1off-16xh100.yaml", 16},
    {"configs/published/verl-qwen2.5-math-7b-dapo-colocated.yaml", 32},
    {"configs/published/verl-qwen2.5-math-7b-dapo-fully-async.yaml", 128},
};

std::string slurp(const stdfs::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// Paths into the tree written in a file: `configs/...`, `data/...`, `slurm/...` and the like,
// at a word boundary (so `$SCRATCH/models/x` and `../build/hpcrl` are not taken for them).
std::set<std::string> tree_paths_named_in(const std::string& text) {
  static const std::regex path(
      R"((?:^|[\s'"(=\[{,:])((?:configs|data|slurm|scripts|docs|benchmarks|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_]))");
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), path), end; it != end; ++it) out.insert((*it)[1]);
  return out;
}

TEST(ShippedConfigs, TableListsEveryConfig) {
  std::set<std::string> on_disk, listed;
  for (const char* dir : {"configs", "configs/published"})
    for (const auto& e : stdfs::directory_iterator(kRoot / dir))
      if (e.path().extension() == ".yaml") on_disk.insert(std::string(dir) + "/" + e.path().filename().string());
  for (const auto& c : kShipped) listed.insert(c.file);
  EXPECT_EQ(on_disk, listed);
}

TEST(ShippedConfigs, EachValidatesAtItsWorldSize) {
  const std::string models_readme = slurp(kRoot / "configs/models/README.md");
  // The one warning a shipped config may carry: a configs/models folder without its downloaded files.
  const std::regex missing_download(R"(no (?:weights|tokenizer\.json) in 'configs/models/([a-z0-9.-]+)')");
  for (const auto& c : kShipped) {
    SCOPED_TRACE(c.file);
    auto r = hpcrl::test::run_command("cd '" + kRoot.string() + "' && '" HPCRL_BINARY "' validate " + c.file +
                                      " --world " + std::to_string(c.world) + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find(c.file + ": valid"), std::string::npos) << r.out;
    EXPECT_TRUE(lines_starting(r.out, "error:").empty()) << r.out;
    for (const auto& w : lines_starting(r.out, "warning:")) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(w, m, missing_download)) << "unexpected warning: " << w;
      EXPECT_NE(models_readme.find("| `" + m[1].str() + "` |"), std::string::npos)
          << "configs/models/README.md does not say where the weights of '" << m[1] << "' come from";
    }
  }
}

TEST(ShippedConfigs, EveryPathTheyNameExists) {
  std::vector<stdfs::path> files;
  for (const auto& c : kShipped) files.push_back(kRoot / c.file);
  for (const auto& e : stdfs::directory_iterator(kRoot / "slurm")) files.push_back(e.path());
  size_t named = 0;
  for (const auto& f : files) {
    for (const auto& p : tree_paths_named_in(slurp(f))) {
      ++named;
      EXPECT_TRUE(stdfs::exists(kRoot / p)) << f.filename() << " names '" << p << "', which is not in the tree";
    }
  }
  // The Perlmutter config alone names its sbatch script, two GSM8K files and two model folders.
  EXPECT_GE(named, 5u);
}

TEST(ShippedConfigs, PathScannerFindsTreePathsOnly) {
  std::set<std::string> expected = {"configs/models/qwen2.5-1.5b", "data/gsm8k/train.jsonl",
                                    "slurm/perlmutter-gpu.sbatch"};
  EXPECT_EQ(tree_paths_named_in("init: {path: configs/models/qwen2.5-1.5b}\n"
                                "  path: data/gsm8k/train.jsonl\n"
                                "#   sbatch -N 2 slurm/perlmutter-gpu.sbatch CONFIG\n"
                                "--set x=$SCRATCH/models/Qwen2.5 HPCRL=$(dirname \"$0\")/../build/hpcrl runs/out\n"),
            expected);
}

}  // namespace
