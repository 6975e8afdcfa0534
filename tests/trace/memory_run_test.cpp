// Peak memory per rank end to end: a short 2-rank CPU run of the e2e pipeline
// (tests/e2e/data/tiny.yaml: SFT 3 steps, GRPO 1 iteration, distillation 2
// steps) writes every rank's peak resident set per stage into metrics.jsonl;
// `hpcrl trace summarize` and `hpcrl report` show those numbers beside
// `hpcrl plan`'s per-rank estimate for the run's own config.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "hpcrl/trace/memory_peaks.h"
#include "trace_test_support.h"

using namespace trace_test;

namespace {

// `cmd` run from the source tree.
Shell in_source_tree(const std::string& cmd) { return shell("cd " HPCRL_SOURCE_DIR " && " + cmd); }

const char* const kMpirun =
    "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "
    "mpirun -np 2 --oversubscribe --bind-to none ";

double machine_memory_bytes() {
  return double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
}

// The run, made once for every test below.
class MemoryRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("memory_run");
    run_ = dir_->str() + "/run";
    Shell r = in_source_tree(std::string(kMpirun) + HPCRL_BINARY + " run tests/e2e/data/tiny.yaml --out " + run_ +
                    " --set 'stages[0].sft.steps=3' --set 'stages[1].grpo.iterations=1' --set "
                    "'stages[2].distill.steps=2' --set run.eval_sampling.prompts=8 2>&1");
    ran_ = r.code == 0;
    if (!ran_) std::fprintf(stderr, "hpcrl run failed (%d):\n%s\n", r.code, r.out.c_str());
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override { ASSERT_TRUE(ran_) << "the run failed (its output is above)"; }

  // metrics.jsonl's memory lines by stage index.
  static std::map<int, nlohmann::json> memory_lines() {
    std::map<int, nlohmann::json> out;
    std::istringstream in(read_text(run_ + "/metrics.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("memory/host_peak_rss_bytes/rank0")) out[j["stage_index"].get<int>()] = j;
    }
    return out;
  }

  // hpcrl plan's peak for `rank`, from `hpcrl plan --json` of the run's resolved config.
  static double plan_peak(int rank) {
    Shell r = in_source_tree(std::string(HPCRL_BINARY) + " plan " + run_ + "/config.resolved.yaml --world 2 --json 2>/dev/null");
    EXPECT_EQ(r.code, 0) << r.out;
    const nlohmann::json plan = nlohmann::json::parse(r.out);
    for (const auto& group : plan["rank_memory"])
      for (const auto& rk : group["ranks"])
        if (rk.get<int>() == rank) return group["peak"].get<double>();
    return -1;
  }

  static TempDir* dir_;
  static std::string run_;
  static bool ran_;
};
TempDir* MemoryRun::dir_ = nullptr;
std::string MemoryRun::run_;
bool MemoryRun::ran_ = false;

}  // namespace

TEST_F(MemoryRun, MetricsHoldEveryRanksHostPeakAtEachStagesLastStep) {
  auto lines = memory_lines();
  ASSERT_EQ(lines.size(), 3u) << "one memory line per stage";
  const std::map<int, std::pair<std::string, int64_t>> stages = {{0, {"sft", 3}}, {1, {"grpo", 1}}, {2, {"distill", 2}}};
  for (const auto& [index, j] : lines) {
    EXPECT_EQ(j["stage"], stages.at(index).first);
    EXPECT_EQ(j["step"].get<int64_t>(), stages.at(index).second);  // the stage's last step
    for (int rank : {0, 1}) {
      const std::string key = "memory/host_peak_rss_bytes/rank" + std::to_string(rank);
      ASSERT_TRUE(j.contains(key)) << key << " in stage " << index;
      const double bytes = j[key].get<double>();
      // A process with LibTorch loaded and a model trained holds well over 16 MiB, and no
      // process holds more than the machine.
      EXPECT_GT(bytes, 16.0 * (1 << 20)) << key;
      EXPECT_LT(bytes, machine_memory_bytes()) << key;
    }
    EXPECT_FALSE(j.contains("memory/host_peak_rss_bytes/rank2")) << "a rank the 2-rank run does not have";
    EXPECT_FALSE(j.contains("memory/cuda_peak_allocated_bytes/rank0")) << "a CPU run has no CUDA allocator";
  }
}

TEST_F(MemoryRun, SummarizeJsonShowsThePeaksBesideThePlan) {
  Shell r = in_source_tree(std::string(HPCRL_BINARY) + " trace summarize " + run_ + " --json 2>/dev/null");
  ASSERT_EQ(r.code, 0);
  auto memory = nlohmann::json::parse(r.out)["memory"];
  ASSERT_EQ(memory["stages"].size(), 3u);
  auto lines = memory_lines();
  for (const auto& stage : memory["stages"]) {
    const auto& line = lines.at(stage["stage_index"].get<int>());
    ASSERT_EQ(stage["ranks"].size(), 2u);
    for (const auto& row : stage["ranks"]) {
      const int rank = row["rank"].get<int>();
      const double measured = line["memory/host_peak_rss_bytes/rank" + std::to_string(rank)].get<double>();
      EXPECT_EQ(row["host_peak_rss_bytes"].get<double>(), measured);
      const double plan = plan_peak(rank);
      ASSERT_GT(plan, 0) << "hpcrl plan has an estimate for rank " << rank;
      EXPECT_EQ(row["plan_bytes"].get<double>(), plan);
      EXPECT_DOUBLE_EQ(row["measured_over_plan"].get<double>(), measured / plan);
    }
  }
}

TEST_F(MemoryRun, SummarizeTableHasARowPerStageAndRank) {
  Shell r = in_source_tree(std::string(HPCRL_BINARY) + " trace summarize " + run_ + " 2>/dev/null");
  ASSERT_EQ(r.code, 0);
  const size_t at = r.out.find("## Peak memory per rank");
  ASSERT_NE(at, std::string::npos) << r.out;
  auto lines = memory_lines();
  const double rank1 = lines.at(1)["memory/host_peak_rss_bytes/rank1"].get<double>();
  // | 1-grpo | 1 | – | – | <host peak> | <plan> | ...: no CUDA columns on a CPU run
  EXPECT_NE(r.out.find("| 1-grpo | 1 | – | – | " + hpcrl::trace::bytes_text(rank1) + " | " +
                       hpcrl::trace::bytes_text(plan_peak(1)) + " | ", at),
            std::string::npos)
      << r.out.substr(at);
}

TEST_F(MemoryRun, ReportPageShowsThePeaksBesideThePlan) {
  const std::string page = dir_->str() + "/report.html";
  Shell r = in_source_tree(std::string(HPCRL_BINARY) + " report " + run_ + " --out " + page + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string html = read_text(page);
  ASSERT_NE(html.find("<table id=\"memory-table\">"), std::string::npos);
  auto lines = memory_lines();
  const double rank0 = lines.at(0)["memory/host_peak_rss_bytes/rank0"].get<double>();
  EXPECT_NE(html.find("<td>0-sft</td><td class=\"n\">0</td><td class=\"n\">–</td><td class=\"n\">–</td><td "
                      "class=\"n\">" + hpcrl::trace::bytes_text(rank0) + "</td><td class=\"n\">" +
                      hpcrl::trace::bytes_text(plan_peak(0)) + "</td>"),
            std::string::npos);
}
