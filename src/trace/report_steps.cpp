// Per-iteration/step time and tokens/s for the report's line charts. The
// metrics file is the first choice: its "seconds/iteration" and
// "seconds/step" are the durations of the step spans measured once on rank 0
// (docs/tracing.md), and only it knows the tokens of a GRPO iteration. A run
// without metrics (trace: {metrics: false}, or a stage that wrote none) falls
// back to the step spans themselves, taking the slowest rank of each step,
// which is what the step cost the run.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "hpcrl/util/strings.h"
#include "report_parts.h"

namespace hpcrl::trace::report {
namespace {

// The step time metric of a line, in the order the stages name it; "" when the
// line has none (an evaluation line, say).
std::string seconds_key(const nlohmann::json& line) {
  for (const char* key : {"seconds/iteration", "seconds/step", "seconds"})
    if (line.contains(key) && line[key].is_number()) return key;
  return "";
}

// The line's tokens/s and where it came from ("" with NaN when it has none).
std::pair<double, std::string> tokens_per_s(const nlohmann::json& line, const std::string& seconds_key) {
  if (line.contains("tokens_per_s") && line["tokens_per_s"].is_number())
    return {line["tokens_per_s"].get<double>(), "metrics.jsonl tokens_per_s"};
  double seconds = line[seconds_key].get<double>();
  if (line.contains("tokens") && line["tokens"].is_number() && seconds > 0)
    return {line["tokens"].get<double>() / seconds, "metrics.jsonl tokens / " + seconds_key};
  return {std::nan(""), ""};
}

std::vector<StepSeries> metrics_series(const std::string& text, int64_t& lines, int64_t& skipped) {
  std::vector<StepSeries> series;
  std::map<std::pair<int, std::string>, size_t> index;  // (stage_index, stage) -> series
  for (const auto& raw : str::split(text, '\n')) {
    std::string line = str::trim(raw);
    if (line.empty()) continue;
    ++lines;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {  // a line cut off by a crash, or not ours
      ++skipped;
      continue;
    }
    std::string key = seconds_key(j);
    if (key.empty() || !j.contains("stage") || !j["stage"].is_string() || !j.contains("step") ||
        !j["step"].is_number_integer())
      continue;
    std::string stage = j["stage"].get<std::string>();
    int stage_index =
        j.contains("stage_index") && j["stage_index"].is_number_integer() ? j["stage_index"].get<int>() : 0;
    auto [it, fresh] = index.emplace(std::make_pair(stage_index, stage), series.size());
    if (fresh) series.push_back({stage, stage_index, "metrics.jsonl " + key, "", {}});
    StepSeries& ss = series[it->second];
    auto [tps, tokens_source] = tokens_per_s(j, key);
    if (ss.tokens_source.empty()) ss.tokens_source = tokens_source;
    ss.points.push_back({j["step"].get<int64_t>(), j[key].get<double>(), tps});
  }
  return series;
}

bool has_arg(const Event& e, const char* key) {
  return std::any_of(e.args.begin(), e.args.end(), [&](const auto& a) { return a.first == key; });
}

// One stage's steps from its step span: per step (its "step" arg, else its
// position on the rank) the slowest rank's duration.
StepSeries span_series(const std::vector<TraceFile>& files, const std::string& stage, const std::string& span) {
  struct Step {
    double seconds = 0, tokens = 0;
    bool has_tokens = false;
  };
  std::map<int64_t, Step> steps;
  std::map<int64_t, int64_t> seen_per_rank;
  for (const auto& f : files)
    for (const auto& e : f.events) {
      if (e.ph != "X" || e.name != span) continue;
      int64_t position = seen_per_rank[e.pid]++;
      Step& st = steps[has_arg(e, "step") ? static_cast<int64_t>(arg_value(e, "step")) : position];
      st.seconds = std::max(st.seconds, e.dur_us * 1e-6);
      if (has_arg(e, "tokens")) {
        st.tokens += arg_value(e, "tokens");
        st.has_tokens = true;
      }
    }
  StepSeries series{stage, -1, "span " + span + " (slowest rank)", "span " + span + " tokens arg", {}};
  for (const auto& [step, st] : steps) {
    double tps = st.has_tokens && st.seconds > 0 ? st.tokens / st.seconds : std::nan("");
    series.points.push_back({step, st.seconds, tps});
  }
  return series;
}

}  // namespace

std::vector<StepSeries> step_series(const std::vector<TraceFile>& files, const Summary& summary,
                                    const std::string& metrics_jsonl, int64_t& lines, int64_t& skipped) {
  std::vector<StepSeries> series = metrics_series(metrics_jsonl, lines, skipped);
  for (const auto& st : summary.spans) {
    if (!is_step_span(summary, st.name)) continue;
    std::string stage = step_stage(st.name);
    bool covered = std::any_of(series.begin(), series.end(), [&](const StepSeries& s) { return s.stage == stage; });
    if (!covered) series.push_back(span_series(files, stage, st.name));
  }
  return series;
}

}  // namespace hpcrl::trace::report
