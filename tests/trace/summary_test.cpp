// Trace summaries. Hand-made events pin each statistic's definition (exact
// values); the committed 2-rank recording (tests/trace/data/run2, made by
// record_trace_main.cpp with real timers) is checked against numbers computed
// independently from its raw events and against its known structure (counts,
// bytes, rank 1's doubled backward work); a killed run and a file cut off
// mid-event are summarised from what they kept.
#include <gtest/gtest.h>

#include <cmath>

#include "hpcrl/trace/summary.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

trace::Event comm_event(int64_t pid, const std::string& group, double ts, double dur, double bytes) {
  trace::Event e = span_event("all_reduce", pid, ts, dur);
  e.cat = "comm";
  e.group = group;
  e.args = {{"bytes", bytes}};
  return e;
}

const trace::SpanStats& span(const trace::Summary& s, const std::string& name) {
  for (const auto& st : s.spans)
    if (st.name == name) return st;
  throw std::runtime_error("no span " + name);
}

std::vector<std::string> span_names(const trace::Summary& s) {
  std::vector<std::string> names;
  for (const auto& st : s.spans) names.push_back(st.name);
  return names;
}

std::vector<std::string> rank_files(const stdfs::path& run) {
  std::vector<std::string> files;
  for (const auto& e : stdfs::directory_iterator(run / "trace"))
    if (e.path().filename().string().rfind("rank-", 0) == 0) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Every statistic of `s` against the independent computation over `files`.
void expect_matches_raw(const trace::Summary& s, const std::vector<std::string>& files) {
  RawSummary raw = raw_summary(files);
  EXPECT_EQ(s.events, raw.events);
  EXPECT_NEAR(s.rank_wall_sum_s, raw.rank_wall_sum_s, 1e-9);
  ASSERT_EQ(s.spans.size(), raw.spans.size());
  for (const auto& st : s.spans) {
    SCOPED_TRACE(st.name);
    ASSERT_TRUE(raw.spans.count(st.name));
    const RawStat& r = raw.spans.at(st.name);
    EXPECT_EQ(st.count, r.count);
    EXPECT_EQ(st.ranks, static_cast<int>(r.rank_s.size()));
    EXPECT_NEAR(st.total_s, r.total_s, 1e-9);
    EXPECT_NEAR(st.mean_s, r.total_s / r.count, 1e-9);
    EXPECT_NEAR(st.p50_s, r.percentile(0.5), 1e-9);
    EXPECT_NEAR(st.p95_s, r.percentile(0.95), 1e-9);
    EXPECT_NEAR(st.max_rank_s, r.max_rank_s(), 1e-9);
    EXPECT_NEAR(st.imbalance, r.imbalance(), 1e-9);
    auto slash = st.name.rfind('/');
    if (slash == std::string::npos) {
      EXPECT_NEAR(st.share, r.total_s / raw.rank_wall_sum_s, 1e-9);
    } else if (raw.spans.count(st.name.substr(0, slash))) {
      EXPECT_NEAR(st.share, r.total_s / raw.spans.at(st.name.substr(0, slash)).total_s, 1e-9);
    } else {
      EXPECT_TRUE(std::isnan(st.share));
    }
  }
  ASSERT_EQ(s.comm.size(), raw.comm.size());
  for (const auto& st : s.comm) {
    const RawStat& r = raw.comm.at(st.op + "|" + st.group);
    EXPECT_EQ(st.count, r.count);
    EXPECT_NEAR(st.total_s, r.total_s, 1e-9);
    EXPECT_EQ(st.bytes, r.bytes);
    EXPECT_NEAR(st.imbalance, r.imbalance(), 1e-9);
    EXPECT_NEAR(st.gbytes_per_s, r.bytes / r.total_s / 1e9, 1e-9);
  }
}

}  // namespace

TEST(TraceSummary, StatisticsFollowTheirDefinitions) {
  trace::TraceFile r0, r1;
  r0.events = {span_event("sft", 0, 0, 100), span_event("sft/step", 0, 0, 40), span_event("sft/step", 0, 50, 40),
               span_event("sft/eval", 0, 95, 5), comm_event(0, "policy/dp[0]", 10, 10, 100)};
  r1.events = {span_event("sft", 1, 0, 200), span_event("sft/step", 1, 0, 150), span_event("grpo/rollout", 1, 300, 50),
               comm_event(1, "policy/dp[1]", 20, 30, 100)};
  auto s = trace::summarize({r0, r1});
  EXPECT_EQ(s.ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(s.wall_s, 350e-6);
  EXPECT_DOUBLE_EQ(s.rank_wall_sum_s, 450e-6);
  // Tree order: children after their parent, siblings by first start (sft/eval is alphabetically first).
  EXPECT_EQ(span_names(s), (std::vector<std::string>{"sft", "sft/step", "sft/eval", "grpo/rollout"}));

  const auto& sft = span(s, "sft");
  EXPECT_EQ(sft.count, 2);
  EXPECT_EQ(sft.ranks, 2);
  EXPECT_DOUBLE_EQ(sft.total_s, 300e-6);
  EXPECT_DOUBLE_EQ(sft.mean_s, 150e-6);
  EXPECT_DOUBLE_EQ(sft.p50_s, 150e-6);
  EXPECT_DOUBLE_EQ(sft.p95_s, 195e-6);
  EXPECT_DOUBLE_EQ(sft.max_rank_s, 200e-6);
  EXPECT_DOUBLE_EQ(sft.imbalance, 200.0 / 150.0);
  EXPECT_DOUBLE_EQ(sft.share, 300.0 / 450.0);  // top level: of the summed rank wall time
  EXPECT_EQ(sft.parent, "");

  const auto& step = span(s, "sft/step");
  EXPECT_EQ(step.count, 3);
  EXPECT_DOUBLE_EQ(step.p50_s, 40e-6);
  EXPECT_NEAR(step.p95_s, 139e-6, 1e-15);  // 40 + 0.9 * (150 - 40)
  EXPECT_DOUBLE_EQ(step.max_rank_s, 150e-6);
  EXPECT_DOUBLE_EQ(step.imbalance, 150.0 / 115.0);
  EXPECT_DOUBLE_EQ(step.share, 230.0 / 300.0);
  EXPECT_EQ(step.parent, "sft");
  EXPECT_EQ(span(s, "sft/eval").ranks, 1);
  EXPECT_DOUBLE_EQ(span(s, "sft/eval").imbalance, 1.0);
  EXPECT_TRUE(std::isnan(span(s, "grpo/rollout").share)) << "parent grpo was never recorded";

  ASSERT_EQ(s.comm.size(), 1u);  // policy/dp[0] and policy/dp[1] are one kind of group
  const auto& ar = s.comm[0];
  EXPECT_EQ(ar.op, "all_reduce");
  EXPECT_EQ(ar.group, "policy/dp");
  EXPECT_EQ(ar.count, 2);
  EXPECT_DOUBLE_EQ(ar.bytes, 200);
  EXPECT_DOUBLE_EQ(ar.total_s, 40e-6);
  EXPECT_DOUBLE_EQ(ar.imbalance, 30.0 / 20.0);
  EXPECT_DOUBLE_EQ(ar.gbytes_per_s, 200 / 40e-6 / 1e9);
}

TEST(TraceSummary, AResumedRunsFileCountsEachProcessButNotTheTimeBetween) {
  // Rank 0's file as a resumed run leaves it: the first process ran 0–100 µs, the resumed one
  // 10000–10030 µs, each starting with its process_name record. Rank 1 ran once, 0–50 µs.
  auto process_name = [](int64_t pid) {
    trace::Event e;
    e.ph = "M";
    e.name = "process_name";
    e.pid = pid;
    return e;
  };
  trace::TraceFile r0, r1;
  r0.events = {process_name(0), span_event("sft", 0, 0, 100), span_event("sft/step", 0, 10, 40),
               process_name(0), span_event("sft/step", 0, 10000, 20), span_event("sft", 0, 10000, 30)};
  r1.events = {process_name(1), span_event("sft", 1, 0, 50)};
  auto s = trace::summarize({r0, r1});
  EXPECT_DOUBLE_EQ(s.wall_s, 130e-6);           // rank 0: 100 + 30, not 10030
  EXPECT_DOUBLE_EQ(s.rank_wall_sum_s, 180e-6);  // + rank 1's 50
  EXPECT_DOUBLE_EQ(span(s, "sft").share, 180.0 / 180.0);
  EXPECT_EQ(span(s, "sft/step").count, 2);
}

TEST(TraceSummary, CommGroupKeyDropsOnlyAGroupIndex) {
  EXPECT_EQ(trace::comm_group_key("policy/tp[3]"), "policy/tp");
  EXPECT_EQ(trace::comm_group_key("policy/tp[12]"), "policy/tp");
  EXPECT_EQ(trace::comm_group_key("world"), "world");
  EXPECT_EQ(trace::comm_group_key("x[a]"), "x[a]");
  EXPECT_EQ(trace::comm_group_key("x[]"), "x[]");
}

TEST(TraceSummary, RecordedTwoRankRunMatchesRawEventsAndItsKnownShape) {
  TempDir tmp("run2");
  copy_run(recorded_run("run2"), tmp.path);
  auto s = trace::summarize_run(tmp.str());
  expect_matches_raw(s, rank_files(tmp.path));
  EXPECT_EQ(s.ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.skipped_events, 0);
  for (const auto& f : s.files) EXPECT_TRUE(f.terminated) << f.path;
  EXPECT_EQ(span_names(s), (std::vector<std::string>{
                               "sft", "sft/step", "sft/step/forward", "sft/step/backward", "sft/step/optimizer",
                               "grpo", "grpo/rollout", "grpo/reward", "grpo/actor_update",
                               "grpo/actor_update/pp_forward", "grpo/actor_update/backward"}));
  // What record_trace_main.cpp did on each of 2 ranks: 3 sft steps, 2 grpo iterations of 2 micro-batches.
  std::map<std::string, int64_t> expected = {
      {"sft", 2},          {"sft/step", 6},          {"sft/step/forward", 6},  {"sft/step/backward", 6},
      {"sft/step/optimizer", 6}, {"grpo", 2},        {"grpo/rollout", 4},      {"grpo/reward", 4},
      {"grpo/actor_update", 4},  {"grpo/actor_update/pp_forward", 8}, {"grpo/actor_update/backward", 4}};
  for (const auto& [name, count] : expected) EXPECT_EQ(span(s, name).count, count) << name;
  // Rank 1 does twice rank 0's backward work: imbalance 2 / 1.5; equal forward work: 1.
  EXPECT_NEAR(span(s, "sft/step/backward").imbalance, 4.0 / 3.0, 0.1);
  EXPECT_LT(span(s, "sft/step/forward").imbalance, 1.1);
  EXPECT_NEAR(span(s, "sft/step/backward").max_rank_s,
              raw_summary(rank_files(tmp.path)).spans["sft/step/backward"].rank_s[1], 1e-12)
      << "rank 1 is the slow one";
  // Children of sft/step run inside it on the same thread: together at most all of it.
  double children = span(s, "sft/step/forward").share + span(s, "sft/step/backward").share +
                    span(s, "sft/step/optimizer").share;
  EXPECT_GT(children, 0.9);
  EXPECT_LE(children, 1.0);
  ASSERT_EQ(s.comm.size(), 2u);
  EXPECT_EQ(s.comm[0].op, "all_reduce");
  EXPECT_EQ(s.comm[0].group, "policy/dp");
  EXPECT_EQ(s.comm[0].count, 10);  // (3 sft + 2 grpo) x 2 ranks
  EXPECT_EQ(s.comm[0].bytes, 10.0 * (1 << 20));
  EXPECT_EQ(s.comm[1].op, "broadcast");
  EXPECT_EQ(s.comm[1].group, "world");
  EXPECT_EQ(s.comm[1].count, 8);  // 2 per rollout, recorded from the communication thread
  EXPECT_EQ(s.comm[1].bytes, 8.0 * (4 << 20));
}

TEST(TraceSummary, KilledRankIsSummarisedFromWhatItFlushed) {
  TempDir tmp("killed");
  copy_run(recorded_run("killed"), tmp.path);
  auto s = trace::summarize_run(tmp.str());
  expect_matches_raw(s, rank_files(tmp.path));
  ASSERT_EQ(s.files.size(), 2u);
  EXPECT_TRUE(s.files[0].terminated);
  EXPECT_FALSE(s.files[1].terminated) << "rank 1 was SIGKILLed";
  EXPECT_EQ(s.skipped_events, 0);
  EXPECT_EQ(span(s, "sft").count, 2) << "rank 1 flushed sft when the top-level span ended";
  EXPECT_EQ(span(s, "sft/step").count, 6);
  EXPECT_EQ(span(s, "grpo").count, 1) << "rank 1 died inside grpo";
  EXPECT_EQ(span(s, "grpo").ranks, 1);
}

TEST(TraceSummary, EventCutOffMidWriteIsSkippedAndReported) {
  TempDir tmp("cut");
  copy_run(recorded_run("run2"), tmp.path);
  std::string path = (tmp.path / "trace" / "rank-00001.json").string();
  std::string text = read_text(path);
  size_t last_event = text.rfind("\n{");
  ASSERT_NE(last_event, std::string::npos);
  write_text(path, text.substr(0, last_event + 25));  // inside the last event
  auto s = trace::summarize_run(tmp.str());
  EXPECT_EQ(s.skipped_events, 1);
  EXPECT_EQ(s.files[1].skipped, 1);
  EXPECT_FALSE(s.files[1].terminated);
  expect_matches_raw(s, rank_files(tmp.path));
  EXPECT_NE(trace::format_markdown(s).find(path + ": 1 event cut off mid-write (crashed run?) was skipped."),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(trace::format_json(s))["skipped_events"], 1);
}

TEST(TraceSummary, BadRunDirectoriesAreInputErrorsNamingThePlace) {
  auto message = [](const std::string& dir) -> std::string {
    try {
      trace::summarize_run(dir);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message("/nonexistent/run"),
            "run directory not found: /nonexistent/run (give the directory a run wrote, e.g. runs/quickstart)");
  TempDir tmp("bad");
  EXPECT_EQ(message(tmp.str()), "no trace files in " + tmp.str() +
                                    "/trace (expected rank-NNNNN.json; run with `trace: {chrome: true}` to record them)");
  stdfs::create_directories(tmp.path / "trace");
  write_text((tmp.path / "trace" / "summary.md").string(), "# not a trace");
  EXPECT_NE(message(tmp.str()).find("no trace files in"), std::string::npos);
  write_text((tmp.path / "trace" / "rank-00000.json").string(), "[\n{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1}\n]");
  write_text((tmp.path / "trace" / "rank-00001.json").string(), "[\n{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1},\nnope");
  EXPECT_EQ(message(tmp.str()), tmp.str() + "/trace/rank-00001.json:3:1: expected a trace event '{', found 'n'; "
                                            "regenerate the trace or move the file out of the trace directory");
  write_text((tmp.path / "f").string(), "x");
  EXPECT_NE(message((tmp.path / "f").string()).find("is not a directory"), std::string::npos);
}

TEST(TraceSummary, CsvCarriesEveryRow) {
  TempDir tmp("formats");
  copy_run(recorded_run("run2"), tmp.path);
  auto s = trace::summarize_run(tmp.str());
  trace::write_summary(s, (tmp.path / "trace").string());
  std::string csv = read_text((tmp.path / "trace" / "summary.csv").string());
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "kind,name,group,count,ranks,total_s,mean_s,p50_s,p95_s,max_rank_s,imbalance,share,bytes,gbytes_per_s");
  size_t rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 13) << line;
  }
  EXPECT_EQ(rows, s.spans.size() + s.comm.size());
  EXPECT_NE(csv.find("span,sft/step,,6,2,"), std::string::npos);
  EXPECT_NE(csv.find("comm,all_reduce,policy/dp,10,2,"), std::string::npos);
}

TEST(TraceSummary, JsonCarriesEachRowsCountsAndBytes) {
  TempDir tmp("json");
  copy_run(recorded_run("run2"), tmp.path);
  const nlohmann::json doc = nlohmann::json::parse(trace::format_json(trace::summarize_run(tmp.str())));
  // What record_trace_main.cpp did on each of 2 ranks (see RecordedTwoRankRunMatchesRawEventsAndItsKnownShape).
  const nlohmann::json* backward = nullptr;
  for (const auto& row : doc.at("spans"))
    if (row.at("name") == "sft/step/backward") backward = &row;
  ASSERT_NE(backward, nullptr) << "no sft/step/backward row";
  EXPECT_EQ(backward->at("count").get<int64_t>(), 6);  // 3 sft steps × 2 ranks
  EXPECT_EQ(backward->at("ranks").get<int>(), 2);
  const nlohmann::json& comm = doc.at("comm");
  ASSERT_EQ(comm.size(), 2u);
  EXPECT_EQ(comm[0].at("op"), "all_reduce");
  EXPECT_EQ(comm[0].at("group"), "policy/dp");
  EXPECT_EQ(comm[0].at("count").get<int64_t>(), 10);  // (3 sft + 2 grpo) × 2 ranks
  EXPECT_EQ(comm[0].at("ranks").get<int>(), 2);
  EXPECT_EQ(comm[1].at("op"), "broadcast");
  EXPECT_EQ(comm[1].at("group"), "world");
  EXPECT_EQ(comm[1].at("count").get<int64_t>(), 8);  // 2 per rollout × 2 rollouts × 2 ranks
  EXPECT_EQ(comm[1].at("ranks").get<int>(), 2);
  EXPECT_EQ(comm[1].at("bytes").get<double>(), 8.0 * (4 << 20));  // 8 calls × 4 MiB = 32 MiB
}

// The Markdown rendering itself: write_summary writes format_markdown's text,
// with the ranks line, a row per span and per collective, and bytes in MiB.
TEST(TraceSummary, MarkdownRendersTheRanksAndARowPerSpanAndCollective) {
  TempDir tmp("markdown");
  copy_run(recorded_run("run2"), tmp.path);
  auto s = trace::summarize_run(tmp.str());
  trace::write_summary(s, (tmp.path / "trace").string());
  std::string md = read_text((tmp.path / "trace" / "summary.md").string());
  EXPECT_EQ(md, trace::format_markdown(s));
  EXPECT_NE(md.find("2 ranks (0-1)"), std::string::npos) << md;
  EXPECT_NE(md.find("| sft/step/backward | 6 | 2 |"), std::string::npos) << md;  // | span | count | ranks |
  EXPECT_NE(md.find("| broadcast | world | 8 | 2 |"), std::string::npos) << md;   // | op | group | count | ranks |
  EXPECT_NE(md.find("32.00 MiB"), std::string::npos) << md;                       // the broadcasts' 8 × 4 MiB
}
