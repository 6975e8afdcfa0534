// The training half of the report (report_curves.h): metrics.jsonl lines as
// numbers, the curves per stage across runs, and the run directory's config
// and last evaluation's samples. Nothing here needs the traces.
#include "hpcrl/trace/report_curves.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::trace {
namespace {

namespace stdfs = std::filesystem;

// The JSON objects of a .jsonl text, one per non-blank line; `bad` counts the
// lines that are not objects (a line cut off by a crash, say).
std::vector<nlohmann::json> jsonl_objects(const std::string& text, int64_t& bad) {
  std::vector<nlohmann::json> out;
  for (const auto& raw : str::split(text, '\n')) {
    std::string line = str::trim(raw);
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      ++bad;
      continue;
    }
    out.push_back(std::move(j));
  }
  return out;
}

bool is_int(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer();
}

std::string string_member(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// The value of `key` on `line`, NaN when absent or null.
double value_of(const MetricsLine& line, const std::string& key) {
  for (const auto& [k, v] : line.values)
    if (k == key) return v;
  return std::nan("");
}

// One run's points of `m` in the lines of stage `stage_index`, in step order.
CurveSeries curve_series(const RunResults& run, size_t run_index, int stage_index, const CurveMetric& m) {
  CurveSeries s{run_index, run.label, {}};
  for (const auto& line : run.metrics) {
    if (line.stage_index != stage_index) continue;
    double v = value_of(line, m.metric);
    if (!std::isfinite(v)) continue;
    double spread = *m.spread ? value_of(line, m.spread) : std::nan("");
    s.points.push_back({line.step, v, std::isfinite(spread) ? spread : std::nan("")});
  }
  std::stable_sort(s.points.begin(), s.points.end(),
                   [](const CurvePoint& a, const CurvePoint& b) { return a.step < b.step; });
  return s;
}

// The stage's name in every run that has it, joined by " / " where they differ.
std::string stage_name(const std::vector<RunResults>& runs, int stage_index) {
  std::vector<std::string> names;
  for (const auto& run : runs)
    for (const auto& line : run.metrics)
      if (line.stage_index == stage_index && std::find(names.begin(), names.end(), line.stage) == names.end())
        names.push_back(line.stage);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " / ") + n;
  return out;
}

}  // namespace

std::vector<MetricsLine> parse_metrics_lines(const std::string& metrics_jsonl) {
  int64_t bad = 0;
  std::vector<MetricsLine> out;
  for (const auto& j : jsonl_objects(metrics_jsonl, bad)) {
    if (!j.contains("stage") || !j["stage"].is_string() || !is_int(j, "step")) continue;
    MetricsLine line{j["stage"].get<std::string>(), is_int(j, "stage_index") ? j["stage_index"].get<int>() : 0,
                     j["step"].get<int64_t>(), {}};
    for (const auto& [key, v] : j.items()) {
      if (key == "stage" || key == "stage_index" || key == "step" || key == "time") continue;
      if (v.is_number()) line.values.emplace_back(key, v.get<double>());
      if (v.is_null()) line.values.emplace_back(key, std::nan(""));
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::vector<EvalSample> last_evaluation_samples(const std::string& eval_samples_jsonl, int64_t& skipped) {
  std::vector<EvalSample> all;
  for (const auto& j : jsonl_objects(eval_samples_jsonl, skipped)) {
    if (!is_int(j, "stage") || !is_int(j, "step")) {
      ++skipped;
      continue;
    }
    EvalSample s{j["stage"].get<int>(), string_member(j, "kind"), j["step"].get<int64_t>(),
                 string_member(j, "prompt"), string_member(j, "response"), string_member(j, "answer"),
                 j.contains("reward") && j["reward"].is_number() ? j["reward"].get<double>() : std::nan("")};
    all.push_back(std::move(s));
  }
  if (all.empty()) return all;
  auto key = [](const EvalSample& s) { return std::make_pair(s.stage, s.step); };
  auto last = key(*std::max_element(all.begin(), all.end(),
                                    [&](const EvalSample& a, const EvalSample& b) { return key(a) < key(b); }));
  std::vector<EvalSample> out;
  for (auto& s : all)
    if (key(s) == last) out.push_back(std::move(s));
  return out;
}

void read_config_and_samples(const std::string& run_dir, RunResults& run) {
  std::error_code ec;
  stdfs::path config = stdfs::path(run_dir) / "config.resolved.yaml";
  run.has_config = stdfs::is_regular_file(config, ec);
  if (run.has_config) run.config_yaml = fs::read_file(config.string(), "resolved config");
  stdfs::path samples = stdfs::path(run_dir) / "eval_samples.jsonl";
  run.has_samples = stdfs::is_regular_file(samples, ec);
  run.samples_skipped = 0;
  run.samples.clear();
  if (run.has_samples)
    run.samples = last_evaluation_samples(fs::read_file(samples.string(), "sample generations file"),
                                          run.samples_skipped);
}

std::vector<StageCurves> learning_curves(const std::vector<RunResults>& runs) {
  std::set<int> stages;
  for (const auto& run : runs)
    for (const auto& line : run.metrics) stages.insert(line.stage_index);
  std::vector<StageCurves> out;
  for (int stage : stages) {
    StageCurves sc{stage, stage_name(runs, stage), {}};
    for (const auto& m : kCurveMetrics) {
      LearningCurve curve{m.metric, m.title, m.spread, {}};
      for (size_t r = 0; r < runs.size(); ++r) {
        CurveSeries s = curve_series(runs[r], r, stage, m);
        if (!s.points.empty()) curve.series.push_back(std::move(s));
      }
      if (!curve.series.empty()) sc.curves.push_back(std::move(curve));
    }
    if (!sc.curves.empty()) out.push_back(std::move(sc));
  }
  return out;
}

}  // namespace hpcrl::trace
