// `hpcrl report` (report.h): the page is well-formed HTML with every chart,
// its text escaped; each observation appears with its hand-computed numbers
// when its basis exists, and never without it; the numbers behind the charts
// (share bars by time nesting, step series, the median step) follow their
// definitions. Synthetic traces are built here as Event lists, one second or
// a simple fraction per span, so every expected number can be worked by hand.
#include "hpcrl/trace/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "hpcrl/util/error.h"
#include "html_check.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;

namespace {

constexpr double kS = 1e6;  // µs per second: events below are written in seconds

trace::Event comm_event(const std::string& op, int64_t pid, const std::string& group, double ts_s, double dur_s,
                        double bytes) {
  trace::Event e = span_event(op, pid, ts_s * kS, dur_s * kS, {{"bytes", bytes}}, trace::kCommLane);
  e.cat = "comm";
  e.group = group;
  return e;
}

trace::Event span_s(const std::string& name, int64_t pid, double ts_s, double dur_s, trace::Args args = {},
                    int64_t lane = trace::kMainLane) {
  return span_event(name, pid, ts_s * kS, dur_s * kS, std::move(args), lane);
}

// One trace file per rank, as the run writes them.
std::vector<trace::TraceFile> files_of(const std::vector<trace::Event>& events) {
  std::map<int64_t, trace::TraceFile> by_rank;
  for (const auto& e : events) {
    auto& f = by_rank[e.pid];
    f.path = "rank-" + std::to_string(e.pid) + ".json";
    f.terminated = true;
    f.events.push_back(e);
  }
  std::vector<trace::TraceFile> files;
  for (auto& [rank, f] : by_rank) files.push_back(std::move(f));
  return files;
}

// A GRPO stage of `iterations` one-second iterations on every rank: rank r
// generates for rollout_s[r] seconds from the iteration's start, then updates
// the policy in [0.6, 0.95) s with an all_reduce in [0.7, 0.8) s on its comm lane.
std::vector<trace::Event> grpo_events(const std::vector<double>& rollout_s, int iterations = 3) {
  std::vector<trace::Event> events;
  for (int64_t r = 0; r < static_cast<int64_t>(rollout_s.size()); ++r) {
    events.push_back(span_s("grpo", r, 0, iterations));
    for (int i = 0; i < iterations; ++i) {
      events.push_back(span_s("grpo/iteration", r, i, 1, {{"step", i}}));
      events.push_back(span_s("grpo/rollout", r, i, rollout_s[r]));
      events.push_back(span_s("grpo/actor_update", r, i + 0.6, 0.35));
      events.push_back(comm_event("all_reduce", r, "policy/dp[0]", i + 0.7, 0.1, 1e6));
    }
  }
  return events;
}

trace::ReportData report_of(const std::vector<trace::Event>& events, const std::string& metrics = "") {
  return trace::collect_report(files_of(events), metrics, "");
}

std::vector<std::string> texts(const trace::ReportData& d) {
  std::vector<std::string> out;
  for (const auto& o : d.observations) out.push_back(o.text);
  return out;
}

bool any_contains(const std::vector<std::string>& texts, const std::string& needle) {
  return std::any_of(texts.begin(), texts.end(),
                     [&](const std::string& t) { return t.find(needle) != std::string::npos; });
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const char* const kChartIds[] = {"learning-curves", "samples",         "config",      "observations", "stage-shares",
                                 "iteration-time",  "tokens-per-s",    "timeline",    "comm-table",   "imbalance-table",
                                 "roles-table",     "bubble-table",    "estimate-table"};

}  // namespace

TEST(TraceReport, HtmlIsWellFormed) {
  auto d = report_of(grpo_events({0.3, 0.48}),
                     R"({"stage":"grpo","stage_index":0,"step":1,"seconds/iteration":1,"tokens_per_s":900})");
  std::string html = trace::render_report_html(d);
  EXPECT_EQ(html_problem(html), "");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "the page needs no script";
  EXPECT_EQ(occurrences(html, "http"), occurrences(html, "xmlns=\"http://www.w3.org/2000/svg\""))
      << "no address but the SVG namespace: nothing to fetch";
}

TEST(TraceReport, HtmlCheckerCatchesWhatItShould) {
  EXPECT_EQ(html_problem("<div><p>x</p></div>"), "");
  EXPECT_NE(html_problem("<div><p>x</div></p>"), "");
  EXPECT_NE(html_problem("<div>a & b</div>"), "");
  EXPECT_NE(html_problem("<svg><rect/>"), "");
}

TEST(TraceReport, PageHasEveryChartIdOnce) {
  // Without roles or pipelining the tables' ids stay, on a note saying so.
  for (const auto& d : {report_of(grpo_events({0.3, 0.3})), report_of({span_s("eval", 0, 0, 1)})}) {
    std::string html = trace::render_report_html(d);
    for (const char* id : kChartIds) EXPECT_EQ(occurrences(html, std::string("id=\"") + id + "\""), 1u) << id;
  }
}

TEST(TraceReport, SlowRankIsNamedWithItsPercentage) {
  // grpo/rollout per rank: 3 × 0.30, 3 × 0.30, 3 × 0.48 s = 0.9, 0.9, 1.44 s; mean 1.08 s;
  // rank 2: 1.44 / 1.08 − 1 = 33 % longer, 0.36 s above the mean.
  auto d = report_of(grpo_events({0.30, 0.30, 0.48}));
  auto it = std::find_if(d.observations.begin(), d.observations.end(),
                         [](const trace::Observation& o) { return o.text.find("longer in") != std::string::npos; });
  ASSERT_NE(it, d.observations.end()) << ::testing::PrintToString(texts(d));
  EXPECT_EQ(it->span, "grpo/rollout");
  EXPECT_NE(it->text.find("rank 2 spends 33 % longer in grpo/rollout"), std::string::npos) << it->text;
  EXPECT_NE(it->text.find("1.44 s against 1.08 s over 3 ranks"), std::string::npos) << it->text;
  EXPECT_NEAR(it->seconds, 0.36, 1e-9);
}

TEST(TraceReport, BalancedRunHasNoImbalanceObservation) {
  auto d = report_of(grpo_events({0.3, 0.3, 0.3}));
  EXPECT_FALSE(any_contains(texts(d), "longer in")) << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, ExcessBelowThresholdIsNoObservation) {
  // 0.30 vs 0.34 s: 0.34 / 0.32 − 1 = 6 %, under kRankExcessMin (15 %).
  auto d = report_of(grpo_events({0.30, 0.34}));
  EXPECT_FALSE(any_contains(texts(d), "longer in")) << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, NestedExcessIsObservedOnceAtTheInnermostSpan) {
  // grpo/grad_sync: 1.0 and 1.6 s (mean 1.3, rank 1 +0.3 s); the grad_sync/wait inside it: 0.2 and
  // 0.8 s (mean 0.5, +0.3 s). One excess, explained by the wait: rank 1 is 60 % longer in grad_sync/wait.
  auto d = report_of({span_s("grpo/grad_sync", 0, 0, 1.0), span_s("grad_sync/wait", 0, 0.8, 0.2),
                      span_s("grpo/grad_sync", 1, 0, 1.6), span_s("grad_sync/wait", 1, 0.8, 0.8)});
  auto t = texts(d);
  EXPECT_EQ(
      std::count_if(t.begin(), t.end(), [](const std::string& s) { return s.find("longer in") != std::string::npos; }),
      1)
      << ::testing::PrintToString(t);
  EXPECT_TRUE(any_contains(t, "rank 1 spends 60 % longer in grad_sync/wait")) << ::testing::PrintToString(t);
}

TEST(TraceReport, RanksOfDifferentRolesAreNotCompared) {
  // Rank 0 trains, rank 1 generates: rank 1's 3 s of rollout/decode against rank 0's 1 s is their roles, not imbalance.
  std::vector<trace::Event> ev = {span_s("grpo", 0, 0, 10),
                                  span_s("grpo/rounds", 0, 0, 10),
                                  span_s("rollout/decode", 0, 1, 1),
                                  span_s("grpo", 1, 0, 10),
                                  span_s("grpo/rounds", 1, 0, 10, {{"generates", 1}}),
                                  span_s("rollout/decode", 1, 1, 3)};
  auto d = report_of(ev);
  EXPECT_FALSE(any_contains(texts(d), "longer in")) << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, NoObservationWithoutItsBasis) {
  // One rank, no step span, no collective, no rounds, no pp/step: nothing to observe.
  auto d = report_of({span_s("sft", 0, 0, 10), span_s("sft/checkpoint", 0, 9, 1), span_s("eval", 0, 10, 2)});
  EXPECT_TRUE(d.observations.empty()) << ::testing::PrintToString(texts(d));
  EXPECT_NE(trace::render_report_html(d).find("No finding passed its threshold"), std::string::npos);
}

TEST(TraceReport, PhaseShareOfTheIterationIsObserved) {
  // One rank, iterations of 1 s, rollout 0.71 s each: 71 % of the GRPO iteration (3 × 0.71 = 2.13 s of 3 s).
  auto d = report_of(grpo_events({0.71}));
  ASSERT_FALSE(d.observations.empty());
  const auto& top = d.observations.front();
  EXPECT_EQ(top.span, "grpo/rollout");
  EXPECT_NE(top.text.find("generation (grpo/rollout) is 71 % of the GRPO iteration (grpo/iteration): 2.13 s of 3.00 s"),
            std::string::npos)
      << top.text;
}

TEST(TraceReport, RoleWaitIsObserved) {
  // The trainer (rank 0) waits 4 of its 10 s of rounds for samples: 40 %. The
  // generator waits 1 of 10 s for weights: 10 %, under kRoleWaitMin (15 %).
  std::vector<trace::Event> ev = {span_s("grpo/rounds", 0, 0, 10), span_s("grpo/wait_samples", 0, 0, 4),
                                  span_s("grpo/rounds", 1, 0, 10, {{"generates", 1}}),
                                  span_s("grpo/wait_weights", 1, 5, 1)};
  auto d = report_of(ev);
  EXPECT_TRUE(
      any_contains(texts(d), "the trainer waits 40 % of grpo/rounds for samples (grpo/wait_samples: 4.00 s of 10.0 s)"))
      << ::testing::PrintToString(texts(d));
  EXPECT_FALSE(any_contains(texts(d), "generation waits")) << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, PipelineBubbleAboveTheoryIsObserved) {
  // p = 4, m = 9: theory 3 / (9 + 3) = 25 %. A 1 s step with 0.69 s of passes: 31 % measured, 0.31 s idle.
  trace::Args step = {{"stage", 0}, {"stages", 4}, {"microbatches", 9}, {"virtual_stages", 1}, {"theory", 0.25}};
  int64_t lane = trace::pipeline_lane(0);
  auto d = report_of({span_s("pp/step", 0, 0, 1, step, lane), span_s("pp/forward", 0, 0.0, 0.3, {}, lane),
                      span_s("pp/backward", 0, 0.4, 0.39, {}, lane)});
  EXPECT_TRUE(any_contains(texts(d), "the pipeline bubble of pp stage 0 is 31 % against 25 % in theory (p = 4, m = 9)"))
      << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, PipelineBubbleNearTheoryIsNoObservation) {
  // Measured 28 % against 25 %: 3 points, under kBubbleExcessMin (5 points).
  trace::Args step = {{"stage", 0}, {"stages", 4}, {"microbatches", 9}, {"virtual_stages", 1}, {"theory", 0.25}};
  int64_t lane = trace::pipeline_lane(0);
  auto d = report_of({span_s("pp/step", 0, 0, 1, step, lane), span_s("pp/forward", 0, 0.0, 0.36, {}, lane),
                      span_s("pp/backward", 0, 0.4, 0.36, {}, lane)});
  EXPECT_FALSE(any_contains(texts(d), "pipeline bubble")) << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, CollectiveShareOfItsSpanIsObserved) {
  // The all_reduce runs 0.1 s inside each 0.35 s actor update: 29 %, on each of 2 ranks.
  auto d = report_of(grpo_events({0.3, 0.3}));
  EXPECT_TRUE(any_contains(texts(d), "all_reduce on policy/dp takes 29 % of grpo/actor_update (0.600 s of 2.10 s"))
      << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, OverlappingCallsAreCountedOnce) {
  // Two sends in flight over [0, 0.6) and [0.2, 0.8) s of a 1 s span: 0.8 s covered (80 %), not 1.2 s.
  auto d = report_of({span_s("sft", 0, 0, 1), span_s("sft/step", 0, 0, 1),
                      comm_event("send", 0, "policy/pp[0]", 0, 0.6, 1e3),
                      comm_event("send", 0, "policy/pp[0]", 0.2, 0.6, 1e3)});
  EXPECT_TRUE(any_contains(
      texts(d), "send on policy/pp is in flight (asynchronous calls) for 80 % of sft/step (0.800 s of 1.00 s)"))
      << ::testing::PrintToString(texts(d));
}

TEST(TraceReport, ObservationsAreRankedBySeconds) {
  auto d = report_of(grpo_events({0.30, 0.30, 0.48}));
  ASSERT_GE(d.observations.size(), 2u);
  for (size_t i = 1; i < d.observations.size(); ++i)
    EXPECT_GE(d.observations[i - 1].seconds, d.observations[i].seconds) << d.observations[i].text;
}

TEST(TraceReport, TextIsEscaped) {
  const std::string name = "grpo/<b>&\"x\"";
  auto d = report_of({span_s("grpo", 0, 0, 1), span_s("grpo/iteration", 0, 0, 1), span_s(name, 0, 0, 0.9)});
  ASSERT_TRUE(any_contains(texts(d), name)) << "the phase observation quotes the name";
  std::string html = trace::render_report_html(d);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("grpo/&lt;b&gt;&amp;&quot;x&quot;"), std::string::npos);
  EXPECT_EQ(html_problem(html), "");
}

TEST(TraceReport, ShareBarsFollowTimeNotNames) {
  // grpo/rollout is named under grpo but runs inside grpo/iteration: it is a part of the iteration's bar.
  auto d = report_of(grpo_events({0.5}));
  std::map<std::string, std::vector<std::string>> parts;
  for (const auto& bar : d.shares)
    for (const auto& p : bar.parts) parts[bar.span].push_back(p.first);
  EXPECT_EQ(parts["grpo"], (std::vector<std::string>{"grpo/iteration"}));
  EXPECT_EQ(parts["grpo/iteration"], (std::vector<std::string>{"grpo/rollout", "grpo/actor_update"}));
  EXPECT_NEAR(d.shares[1].parts[0].second, 1.5, 1e-9);  // 3 × 0.5 s of rollout inside 3 s of iterations
}

TEST(TraceReport, StepSeriesComeFromMetrics) {
  std::string metrics =
      R"({"stage":"grpo","stage_index":1,"step":1,"time":1,"seconds/iteration":2.0,"tokens_per_s":500})"
      "\n"
      R"({"stage":"grpo","stage_index":1,"step":1,"time":2,"eval/accuracy":0.5,"seconds/eval":1.0})"
      "\n"
      R"({"stage":"grpo","stage_index":1,"step":2,"time":3,"seconds/iteration":1.5,"tokens":3000})"
      "\n"
      R"({"stage":"grpo","stage_index":1,"st)";  // cut off by a crash
  auto d = report_of(grpo_events({0.3}), metrics);
  ASSERT_EQ(d.steps.size(), 1u) << "metrics cover grpo: its spans are not a second series";
  const auto& s = d.steps[0];
  EXPECT_EQ(s.source, "metrics.jsonl seconds/iteration");
  ASSERT_EQ(s.points.size(), 2u) << "the evaluation line has no step time";
  EXPECT_DOUBLE_EQ(s.points[0].seconds, 2.0);
  EXPECT_DOUBLE_EQ(s.points[0].tokens_per_s, 500);
  EXPECT_DOUBLE_EQ(s.points[1].tokens_per_s, 2000);  // 3000 tokens / 1.5 s
  EXPECT_EQ(d.metrics_lines, 4);
  EXPECT_EQ(d.metrics_skipped, 1);
}

TEST(TraceReport, StepSeriesFallBackToTheSlowestRanksSpans) {
  // Without metrics: per step the slowest rank's sft/step (1 s on rank 0, 2 s on rank 1 for step 0).
  auto d = report_of({span_s("sft", 0, 0, 3), span_s("sft/step", 0, 0, 1, {{"step", 0}}),
                      span_s("sft/step", 0, 1, 1, {{"step", 1}}), span_s("sft", 1, 0, 3),
                      span_s("sft/step", 1, 0, 2, {{"step", 0}}), span_s("sft/step", 1, 2, 0.5, {{"step", 1}})});
  ASSERT_EQ(d.steps.size(), 1u);
  ASSERT_EQ(d.steps[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(d.steps[0].points[0].seconds, 2.0);
  EXPECT_DOUBLE_EQ(d.steps[0].points[1].seconds, 1.0);
  EXPECT_TRUE(std::isnan(d.steps[0].points[0].tokens_per_s));
}

TEST(TraceReport, TimelineDrawsTheMedianStepOnEveryRank) {
  // Iterations of 1, 3 and 2 s on rank 0: the median is the 2 s one (step 2, from 4 s); rank 1's
  // all_reduce over [4.5, 7) s is cut at the window's end.
  std::vector<trace::Event> ev = {span_s("grpo", 0, 0, 6), span_s("grpo/iteration", 0, 0, 1, {{"step", 0}}),
                                  span_s("grpo/iteration", 0, 1, 3, {{"step", 1}}),
                                  span_s("grpo/iteration", 0, 4, 2, {{"step", 2}}),
                                  comm_event("all_reduce", 1, "world", 4.5, 2.5, 8)};
  auto d = report_of(ev);
  const auto& t = d.timeline;
  EXPECT_EQ(t.span, "grpo/iteration");
  EXPECT_EQ(t.step, 2);
  EXPECT_EQ(t.candidates, 3);
  EXPECT_DOUBLE_EQ(t.window_s, 2);
  auto comm = std::find_if(t.events.begin(), t.events.end(), [](const trace::TimelineEvent& e) { return e.comm; });
  ASSERT_NE(comm, t.events.end());
  EXPECT_EQ(comm->rank, 1);
  EXPECT_NEAR(comm->start_s, 0.5, 1e-9);
  EXPECT_NEAR(comm->dur_s, 1.5, 1e-9);
  EXPECT_EQ(t.lanes.size(), 2u);  // rank 0 main, rank 1 comm
  auto grpo =
      std::find_if(t.events.begin(), t.events.end(), [](const trace::TimelineEvent& e) { return e.name == "grpo"; });
  ASSERT_NE(grpo, t.events.end());
  EXPECT_EQ(grpo->depth, 0) << "the stage encloses the step even where the window cuts both to one interval";
}

TEST(TraceReport, CrowdedTimelineKeepsItsLongestEvents) {
  // 1 s iteration holding 4500 decode steps of 100 µs and 10 of 200 µs: 4512 events with the stage and
  // the iteration, 4000 kept: the 12 longer ones and 3988 of the 100 µs ones; 512 left out.
  std::vector<trace::Event> ev = {span_s("grpo", 0, 0, 1), span_s("grpo/iteration", 0, 0, 1)};
  for (int i = 0; i < 4500; ++i) ev.push_back(span_s("rollout/decode", 0, i * 2e-4, 1e-4));
  for (int i = 0; i < 10; ++i) ev.push_back(span_s("rollout/prefill", 0, 0.9 + i * 1e-3, 2e-4));
  const auto& t = report_of(ev).timeline;
  EXPECT_EQ(t.events.size(), 4000u);
  EXPECT_EQ(t.dropped, 512);
  EXPECT_EQ(std::count_if(t.events.begin(), t.events.end(),
                          [](const trace::TimelineEvent& e) { return e.name == "rollout/prefill"; }),
            10);
}

TEST(TraceReport, RecordedRunNamesItsSlowBackwardRank) {
  // tests/trace/data/run2: rank 1 does twice rank 0's backward work (record_trace_main.cpp).
  TempDir tmp("report_run2");
  copy_run(recorded_run("run2"), tmp.path);
  trace::ReportData d;
  std::string path = trace::write_report(tmp.str(), "", &d);
  EXPECT_EQ(path, (tmp.path / "report.html").string());
  EXPECT_TRUE(any_contains(texts(d), "rank 1 spends")) << ::testing::PrintToString(texts(d));
  std::string html = read_text(path);
  EXPECT_EQ(html_problem(html), "");
  for (const char* id : kChartIds) EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
}

TEST(TraceReport, WritesTheRunDirsReportAtomically) {
  TempDir tmp("report_write");
  stdfs::create_directories(tmp.path / "trace");
  write_text((tmp.path / "trace" / "rank-00000.json").string(),
             "[\n{\"name\":\"sft\",\"cat\":\"span\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1000}\n]\n");
  write_text((tmp.path / "config.resolved.yaml").string(), "run:\n  name: my-run\n  seed: 1\n");
  std::string out = (tmp.path / "sub" / "page.html").string();
  EXPECT_EQ(trace::write_report(tmp.str(), out), out);
  std::string html = read_text(out);
  EXPECT_NE(html.find("hpcrl report: my-run"), std::string::npos);
  std::vector<std::string> left;
  for (const auto& e : stdfs::directory_iterator(tmp.path / "sub")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, (std::vector<std::string>{"page.html"})) << "no temporary file left behind";
}

TEST(TraceReport, RunDirWithoutTracesIsAnInputError) {
  TempDir tmp("report_empty");
  EXPECT_THROW(trace::collect_run_report(tmp.str()), InputError);
  EXPECT_THROW(trace::write_report((tmp.path / "missing").string(), ""), InputError);
  EXPECT_FALSE(stdfs::exists(tmp.path / "report.html"));
}
