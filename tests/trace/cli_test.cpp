// `hpcrl trace summarize` end to end on the committed 2-rank recording: exit
// codes, the files it writes, the printed table, and `--json` as exactly one
// JSON document whose numbers match an independent reading of the raw events.
// Bad input exits 2 with a message naming the place and writes nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "hpcrl/trace/summary.h"
#include "trace_test_support.h"

using namespace trace_test;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

Result run_hpcrl(const std::string& args, const TempDir& scratch) {
  const std::string err_path = scratch.str() + "/stderr.txt";
  const Shell s = shell(std::string(HPCRL_BINARY) + " " + args + " 2>" + err_path);
  return {s.code, s.out, read_text(err_path)};
}

}  // namespace

TEST(TraceCli, SummarizeWritesFilesAndPrintsTheTable) {
  TempDir scratch("cli");
  stdfs::path run = scratch.path / "run2";
  copy_run(recorded_run("run2"), run);
  Result r = run_hpcrl("trace summarize " + run.string(), scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string md = read_text((run / "trace" / "summary.md").string());
  EXPECT_EQ(r.out, md) << "prints the table it writes";
  // ... which is the library's rendering of the run (summary_test.cpp checks what it shows).
  EXPECT_EQ(md, hpcrl::trace::format_markdown(hpcrl::trace::summarize_run(run.string())));
  std::string csv = read_text((run / "trace" / "summary.csv").string());
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "kind,name,group,count,ranks,total_s,mean_s,p50_s,p95_s,max_rank_s,imbalance,share,bytes,gbytes_per_s");
  EXPECT_NE(csv.find("comm,broadcast,world,8,2,"), std::string::npos);
}

TEST(TraceCli, JsonIsOneDocumentMatchingTheRawEvents) {
  TempDir scratch("cli_json");
  stdfs::path run = scratch.path / "run2";
  copy_run(recorded_run("run2"), run);
  Result r = run_hpcrl("trace summarize " + run.string() + " --json", scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);  // throws unless stdout is exactly one document
  EXPECT_TRUE(stdfs::exists(run / "trace" / "summary.md"));
  RawSummary raw = raw_summary({(run / "trace" / "rank-00000.json").string(),
                                (run / "trace" / "rank-00001.json").string()});
  EXPECT_EQ(doc["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(doc["skipped_events"], 0);
  // One row by its known values: record_trace_main.cpp ran 3 sft steps on each of 2 ranks.
  const nlohmann::json* sft_step = nullptr;
  for (const auto& row : doc["spans"])
    if (row["name"] == "sft/step") sft_step = &row;
  ASSERT_NE(sft_step, nullptr) << "no sft/step row";
  EXPECT_EQ(sft_step->at("count").get<int64_t>(), 6);  // 3 steps × 2 ranks
  EXPECT_EQ(sft_step->at("ranks").get<int>(), 2);
  ASSERT_EQ(doc["spans"].size(), raw.spans.size());
  for (const auto& row : doc["spans"]) {
    const RawStat& st = raw.spans.at(row["name"].get<std::string>());
    EXPECT_EQ(row["count"], st.count) << row["name"];
    EXPECT_NEAR(row["total_s"].get<double>(), st.total_s, 1e-9) << row["name"];
    EXPECT_NEAR(row["imbalance"].get<double>(), st.imbalance(), 1e-9) << row["name"];
  }
  const auto& grpo_backward = raw.spans.at("grpo/actor_update/backward");
  for (const auto& row : doc["spans"])
    if (row["name"] == "grpo/actor_update/backward") {
      EXPECT_EQ(row["parent"], "grpo/actor_update");
      EXPECT_NEAR(row["share"].get<double>(), grpo_backward.total_s / raw.spans.at("grpo/actor_update").total_s, 1e-9);
    }
  ASSERT_EQ(doc["comm"].size(), 2u);
  EXPECT_EQ(doc["comm"][0]["op"], "all_reduce");
  EXPECT_EQ(doc["comm"][0]["bytes"].get<double>(), raw.comm.at("all_reduce|policy/dp").bytes);
  EXPECT_EQ(doc["comm"][1]["count"], raw.comm.at("broadcast|world").count);
}

TEST(TraceCli, BadInputExitsTwoNamingThePlaceAndWritesNothing) {
  TempDir scratch("cli_bad");
  Result missing = run_hpcrl("trace summarize " + scratch.str() + "/nope", scratch);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("run directory not found: " + scratch.str() + "/nope"), std::string::npos) << missing.err;

  stdfs::path run = scratch.path / "run";
  stdfs::create_directories(run / "trace");
  Result empty = run_hpcrl("trace summarize " + run.string(), scratch);
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("no trace files in " + (run / "trace").string()), std::string::npos) << empty.err;

  write_text((run / "trace" / "rank-00000.json").string(), "{\"not\": \"a trace\"}");
  Result bad = run_hpcrl("trace summarize " + run.string() + " --json", scratch);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find((run / "trace" / "rank-00000.json").string() + ":1:1: not a Chrome trace"),
            std::string::npos)
      << bad.err;
  EXPECT_TRUE(bad.out.empty()) << "nothing on stdout for a failed --json";
  EXPECT_FALSE(stdfs::exists(run / "trace" / "summary.md"));
  EXPECT_FALSE(stdfs::exists(run / "trace" / "summary.csv"));

  Result no_sub = run_hpcrl("trace", scratch);
  EXPECT_EQ(no_sub.code, 2);
  Result no_dir = run_hpcrl("trace summarize", scratch);
  EXPECT_EQ(no_dir.code, 2);
  EXPECT_NE(no_dir.err.find("RUN_DIR"), std::string::npos) << no_dir.err;
}
