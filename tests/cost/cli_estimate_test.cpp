// `hpcrl trace summarize --estimate` and `hpcrl report --estimate` end to end on
// the hand-made run of synthetic_run.h: the JSON document gains an "estimate"
// member with the library's numbers, the text form a section, the page its
// table; a profile that does not exist exits 2 naming it and writes no page.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hpcrl/cost/run_comparison.h"
#include "hpcrl/trace/summary.h"
#include "synthetic_run.h"

namespace {

namespace stdfs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;
};

Result run_hpcrl(const std::string& args) {
  Result r;
  FILE* p = ::popen((std::string(HPCRL_BINARY) + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

struct Scratch {
  std::string dir = (stdfs::temp_directory_path() / ("hpcrl_cost_cli_" + std::to_string(::getpid()))).string();
  std::string run = dir + "/run", profile = dir + "/test-cpu.yaml";
  Scratch() {
    stdfs::remove_all(dir);
    cost_test::write_synthetic_sft_run(run);
    cost_test::write_file(profile, "name: test-cpu\ncompute: {peak_flops: 3e10, efficiency: 1}\n"
                                   "memory: {bandwidth: 1e10, efficiency: 1, capacity: 1.6e10}\n"
                                   "kernel_overhead_s: 2e-6\ngpus_per_node: 2\n"
                                   "intra_node: {bandwidth: 2e9, latency_s: 1e-6}\n"
                                   "inter_node: {bandwidth: 2e9, latency_s: 1e-6}\n");
  }
  ~Scratch() { stdfs::remove_all(dir); }
};

}  // namespace

TEST(CostCli, SummarizeJsonHasTheEstimateBesideTheSpans) {
  Scratch s;
  const Result r = run_hpcrl("trace summarize " + s.run + " --json --estimate " + s.profile);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);  // still exactly one document
  ASSERT_TRUE(j.contains("spans"));
  ASSERT_TRUE(j.contains("estimate"));
  const auto& e = j["estimate"];
  EXPECT_EQ(e["profile"], "test-cpu");
  const auto want = hpcrl::cost::compare_with_run(s.run, hpcrl::trace::read_run_traces(s.run),
                                                  hpcrl::cost::load_profile(s.profile));
  ASSERT_EQ(e["rows"].size(), want.rows.size());
  for (size_t i = 0; i < want.rows.size(); ++i) {
    EXPECT_EQ(e["rows"][i]["span"], want.rows[i].span);
    EXPECT_DOUBLE_EQ(e["rows"][i]["predicted_s"].get<double>(), want.rows[i].predicted_s);
    // A span the run did not record (the synthetic run has one rank: no gradient sync) is null.
    if (std::isfinite(want.rows[i].measured_s))
      EXPECT_NEAR(e["rows"][i]["measured_s"].get<double>(), want.rows[i].measured_s, 1e-12);
    else
      EXPECT_TRUE(e["rows"][i]["measured_s"].is_null()) << e["rows"][i];
    for (const char* key : {"stage", "predicted_from", "samples", "ratio", "flops", "bytes", "mfu",
                            "bandwidth_utilisation"})
      EXPECT_TRUE(e["rows"][i].contains(key)) << key;
  }
}

TEST(CostCli, SummarizeTextAndReportShowTheTable) {
  Scratch s;
  const Result text = run_hpcrl("trace summarize " + s.run + " --estimate " + s.profile);
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("## Predicted vs measured (test-cpu)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("| sft | sft/forward_backward | 0.8 |"), std::string::npos) << text.out;
  const Result page = run_hpcrl("report " + s.run + " --estimate " + s.profile);
  ASSERT_EQ(page.code, 0);
  std::ifstream in(s.run + "/report.html");
  std::stringstream html;
  html << in.rdbuf();
  EXPECT_NE(html.str().find("<table id=\"estimate-table\">"), std::string::npos);
  EXPECT_NE(page.out.find("MFU"), std::string::npos) << "the observations are printed too: " << page.out;
}

TEST(CostCli, AnUnknownProfileExitsTwoAndWritesNoPage) {
  Scratch s;
  const Result r = run_hpcrl("report " + s.run + " --estimate no-such-profile");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(stdfs::exists(s.run + "/report.html"));
}
