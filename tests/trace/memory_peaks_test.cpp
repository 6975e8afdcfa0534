// Peak memory per rank and stage (memory_peaks.h): the process's peak resident
// set read from /proc and started over, and the table read back from
// metrics.jsonl lines in JSON, Markdown and the report's HTML.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "hpcrl/trace/memory_peaks.h"
#include "trace_test_support.h"

using namespace hpcrl;

namespace {
constexpr int64_t kMiB = int64_t(1) << 20;

// `bytes` of fresh pages, every one written, so they are resident; unmapped at scope end.
struct TouchedPages {
  void* p;
  size_t n;
  explicit TouchedPages(size_t bytes) : n(bytes) {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) std::memset(p, 1, n);
  }
  ~TouchedPages() {
    if (p != MAP_FAILED) ::munmap(p, n);
  }
};

int64_t machine_memory_bytes() {
  return int64_t(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
}

trace::MetricsLine line(const std::string& stage, int index, int64_t step,
                        std::vector<std::pair<std::string, double>> values) {
  trace::MetricsLine l;
  l.stage = stage;
  l.stage_index = index;
  l.step = step;
  l.values = std::move(values);
  return l;
}
}  // namespace

TEST(HostPeakRss, CoversPagesJustTouchedAndStaysBelowTheMachine) {
  TouchedPages pages(64 * kMiB);
  ASSERT_NE(pages.p, MAP_FAILED);
  auto peak = trace::host_peak_rss_bytes();
  ASSERT_TRUE(peak.has_value());
  EXPECT_GE(*peak, 64 * kMiB);  // the 64 MiB are resident now, so the peak holds them
  EXPECT_LT(*peak, machine_memory_bytes());
}

TEST(HostPeakRss, ResetStartsThePeakOverAtTheCurrentSet) {
  int64_t before = 0;
  {
    TouchedPages pages(256 * kMiB);
    ASSERT_NE(pages.p, MAP_FAILED);
    before = trace::host_peak_rss_bytes().value_or(0);
    ASSERT_GE(before, 256 * kMiB);
  }  // unmapped: the resident set drops by 256 MiB, the peak does not (give or take the few
  // hundred KiB by which the kernel's per-thread RSS counters lag: it syncs them every 64 faults)
  EXPECT_GT(trace::host_peak_rss_bytes().value_or(0), before - 8 * kMiB);
  ASSERT_TRUE(trace::reset_host_peak_rss()) << "this kernel refuses /proc/self/clear_refs";
  // After the reset the peak is the current set, at least 256 MiB below the old peak
  // (128 MiB of margin for whatever else the process allocates meanwhile).
  EXPECT_LT(trace::host_peak_rss_bytes().value_or(before), before - 128 * kMiB);
}

TEST(MemoryPeaks, MetricKeyNamesWhatAndRank) {
  EXPECT_EQ(trace::memory_metric(trace::kCudaPeakAllocated, 3), "memory/cuda_peak_allocated_bytes/rank3");
  EXPECT_EQ(trace::memory_metric(trace::kHostPeakRss, 0), "memory/host_peak_rss_bytes/rank0");
}

TEST(MemoryPeaks, ReadsEachStagesRanksAndKeepsTheLargestOfAResumedStage) {
  std::vector<trace::MetricsLine> lines = {
      line("sft", 0, 10, {{"loss", 1.5}}),
      line("sft", 0, 10, {{"memory/host_peak_rss_bytes/rank0", 100}, {"memory/host_peak_rss_bytes/rank1", 300}}),
      line("grpo", 1, 2, {{"memory/host_peak_rss_bytes/rank1", 700}, {"memory/cuda_peak_allocated_bytes/rank1", 50}}),
      // stopped at 2, resumed: the second part's line; rank 1's peak of the stage stays 700
      line("grpo", 1, 4, {{"memory/host_peak_rss_bytes/rank1", 600}, {"memory/host_peak_rss_bytes/rank0", 200}}),
      line("grpo", 1, 4, {{"memory/unknown/rank0", 5}, {"memory/host_peak_rss_bytes/rankX", 9}}),
  };
  trace::MemoryPeaks m = trace::memory_peaks_from_metrics(lines);
  ASSERT_EQ(m.stages.size(), 2u);
  EXPECT_EQ(m.ranks(), 2);
  EXPECT_EQ(m.stages[0].stage, "sft");
  ASSERT_EQ(m.stages[0].ranks.size(), 2u);
  EXPECT_EQ(m.stages[0].ranks[1].host_peak_rss, 300);
  EXPECT_TRUE(std::isnan(m.stages[0].ranks[1].cuda_peak_allocated));  // a CPU line has no CUDA numbers
  const auto& grpo = m.stages[1];
  EXPECT_EQ(grpo.stage_index, 1);
  ASSERT_EQ(grpo.ranks.size(), 2u);
  EXPECT_EQ(grpo.ranks[0].host_peak_rss, 200);
  EXPECT_EQ(grpo.ranks[1].host_peak_rss, 700);      // max(700, 600)
  EXPECT_EQ(grpo.ranks[1].cuda_peak_allocated, 50);
  EXPECT_EQ(grpo.ranks[1].measured(), 50);          // the CUDA number where there is one
}

TEST(MemoryPeaks, JsonAndMarkdownPutThePlanBesideTheMeasuredPeak) {
  trace::MemoryPeaks m = trace::memory_peaks_from_metrics(
      {line("sft", 0, 5, {{"memory/host_peak_rss_bytes/rank0", 3.0 * (1 << 30)}})});
  m.stages[0].ranks[0].plan_bytes = 2.0 * (1 << 30);
  m.plan_note = "hpcrl plan for 1 rank";
  auto j = nlohmann::json::parse(trace::memory_peaks_json(m));
  const auto& row = j["stages"][0]["ranks"][0];
  EXPECT_EQ(row["host_peak_rss_bytes"].get<double>(), 3.0 * (1 << 30));
  EXPECT_TRUE(row["cuda_peak_allocated_bytes"].is_null());
  EXPECT_DOUBLE_EQ(row["measured_over_plan"].get<double>(), 1.5);  // 3 GiB / 2 GiB
  std::string md = trace::memory_peaks_markdown(m);
  EXPECT_NE(md.find("| 0-sft | 0 | – | – | 3.00 GiB | 2.00 GiB | 1.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Plan: hpcrl plan for 1 rank."), std::string::npos);
}

TEST(MemoryPeaks, HtmlTableOrANoteWhenNothingWasRecorded) {
  trace::MemoryPeaks none;
  std::string absent = trace::memory_peaks_html(none);
  EXPECT_NE(absent.find("<p id=\"memory-table\" class=\"absent\">"), std::string::npos);
  trace::MemoryPeaks m = trace::memory_peaks_from_metrics(
      {line("grpo", 1, 3, {{"memory/cuda_peak_allocated_bytes/rank0", 1536.0 * (1 << 20)},
                           {"memory/cuda_peak_reserved_bytes/rank0", 2.0 * (1 << 30)}})});
  std::string html = trace::memory_peaks_html(m);
  EXPECT_NE(html.find("<table id=\"memory-table\">"), std::string::npos);
  // 1536 MiB = 1.50 GiB allocated, 2.00 GiB reserved; no host number, no plan.
  EXPECT_NE(html.find("<td>1-grpo</td><td class=\"n\">0</td><td class=\"n\">1.50 GiB</td><td class=\"n\">2.00 GiB"
                      "</td><td class=\"n\">–</td><td class=\"n\">–</td><td class=\"n\">–</td>"),
            std::string::npos)
      << html;
}
