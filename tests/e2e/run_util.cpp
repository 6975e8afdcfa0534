// Child-process helpers for end-to-end tests (see run_util.h).
#include "run_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hpcrl::test {

Proc run_shell(const std::string& cmd) {
  Proc p;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return p;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) p.output.append(buf.data(), n);
  int status = pclose(f);
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return p;
}

static std::string command(const std::string& args, int np) {
  std::string bin = HPCRL_BINARY;
  if (np <= 1) return bin + " " + args;
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 mpirun -np " +
         std::to_string(np) + " --oversubscribe --bind-to none " + bin + " " + args;
}

Proc run_hpcrl(const std::string& args, int np, const std::string& env) {
  return run_shell("cd " HPCRL_SOURCE_DIR " && " + (env.empty() ? "" : "env " + env + " ") + command(args, np));
}

int spawn_hpcrl(const std::string& args, int np, const std::string& log_path, const std::string& env) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string cmd = "cd " HPCRL_SOURCE_DIR " && exec " + (env.empty() ? "" : "env " + env + " ") +
                      command(args, np) + " >" + log_path + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit(int pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<nlohmann::json> lines_with(const std::vector<nlohmann::json>& m, const std::string& stage,
                                       const std::string& key) {
  std::vector<nlohmann::json> out;
  for (const auto& j : m)
    if (j.value("stage", "") == stage && j.contains(key)) out.push_back(j);
  return out;
}

std::string scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("hpcrl-e2e-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::pair<std::vector<nlohmann::json>, std::vector<nlohmann::json>> run_twice(
    const std::string& cfg, const std::string& name, int base_np, const std::string& changed, int changed_np,
    const std::string& stage, const std::string& key) {
  const std::string dir = scratch_dir(name);
  Proc base = run_hpcrl("run " + cfg + " --out " + dir + "/base", base_np);
  EXPECT_EQ(base.exit_code, 0) << base.output;
  Proc other = run_hpcrl("run " + cfg + changed + " --out " + dir + "/changed", changed_np);
  EXPECT_EQ(other.exit_code, 0) << other.output;
  return {lines_with(read_metrics(dir + "/base/metrics.jsonl"), stage, key),
          lines_with(read_metrics(dir + "/changed/metrics.jsonl"), stage, key)};
}

nlohmann::json without_timing(nlohmann::json j) {
  for (auto it = j.begin(); it != j.end();) {
    const std::string& k = it.key();
    if (k == "time" || k == "tokens_per_s" || k.rfind("seconds/", 0) == 0 || k.rfind("memory/", 0) == 0)
      it = j.erase(it);
    else ++it;
  }
  return j;
}

std::string write_tiny_config_with(const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& edits) {
  std::ifstream in("tests/e2e/data/tiny.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string y = ss.str();
  for (const auto& [from, to] : edits) {
    const auto at = y.find(from);
    EXPECT_NE(at, std::string::npos) << "tests/e2e/data/tiny.yaml has no '" << from << "'";
    if (at != std::string::npos) y.replace(at, from.size(), to);
  }
  std::ofstream(path) << y;
  return path;
}

void expect_close_curves(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                         const std::string& key, double rel_tol) {
  ASSERT_EQ(a.size(), b.size()) << key;
  ASSERT_FALSE(a.empty()) << key;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
    EXPECT_NEAR(x, y, rel_tol * std::max(1.0, std::abs(x))) << key << " at line " << i;
  }
}

void expect_same_rollouts(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                          const std::vector<std::pair<std::string, double>>& close) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_EQ(a[i]["reward/mean"], b[i]["reward/mean"]);  // same rollouts from the same weights
    EXPECT_EQ(a[i]["response_len/mean"], b[i]["response_len/mean"]);
    for (const auto& [key, tol] : close) expect_close_curves({a[i]}, {b[i]}, key, tol);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void expect_same_metrics(const std::string& a_path, const std::string& b_path) {
  auto a = read_metrics(a_path), b = read_metrics(b_path);
  ASSERT_EQ(a.size(), b.size()) << a_path << " vs " << b_path;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(without_timing(a[i]), without_timing(b[i])) << "line " << i;
}

void back_to_checkpoint(const std::string& run_dir, const std::string& stage, int64_t step) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(run_dir) / "checkpoints" / stage;
  char kept[32];
  std::snprintf(kept, sizeof kept, "step-%06lld", static_cast<long long>(step));
  ASSERT_TRUE(fs::exists(dir / kept)) << (dir / kept);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("step-", 0) == 0 && e.path().filename().string() > kept)
      fs::remove_all(e.path());
  fs::remove(dir / "complete.json");
}

void expect_exact_resume(const std::string& run_args, const std::string& run_dir, const std::string& stage,
                         int64_t step, int np) {
  const auto full = read_metrics(run_dir + "/metrics.jsonl");
  ASSERT_NO_FATAL_FAILURE(back_to_checkpoint(run_dir, stage, step));
  Proc resumed = run_hpcrl("run " + run_args + " --resume", np);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto again = read_metrics(run_dir + "/metrics.jsonl");
  ASSERT_EQ(again.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(without_timing(full[i]), without_timing(again[i])) << "line " << i;
}

}  // namespace hpcrl::test
