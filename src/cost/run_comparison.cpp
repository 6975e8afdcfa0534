// Predicted beside measured for a finished run (run_comparison.h).
#include "hpcrl/cost/run_comparison.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "hpcrl/config/loader.h"
#include "hpcrl/cost/stage_estimate.h"
#include "hpcrl/util/error.h"

namespace hpcrl::cost {

namespace {
namespace stdfs = std::filesystem;

// A trace span and the estimate's spans that predict it ("x/*": every span under x).
struct SpanMap {
  std::string span;
  std::vector<std::string> predicted_by;
  bool decode = false;  // bandwidth-bound: utilisation of the memory bandwidth, not MFU
};

bool matches(const std::string& name, const std::string& pattern) {
  if (pattern.size() > 2 && pattern.compare(pattern.size() - 2, 2, "/*") == 0)
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return name == pattern;
}

// The spans `hpcrl run` records for each stage kind (docs/tracing.md) and the estimate's names for them.
std::vector<SpanMap> span_maps(const StageEstimate& e) {
  const std::string& p = e.stage;
  if (p == "sft")
    return {{"sft/forward_backward", {"train/forward_backward"}}, {"sft/grad_sync", {"train/grad_sync"}},
            {"sft/optimizer", {"train/optimizer"}}};
  const std::vector<SpanMap> engine = {{"rollout/prefill", {"rollout/prefill"}},
                                       {"rollout/decode", {"rollout/decode"}, true}};
  std::vector<SpanMap> maps;
  if (p == "distill") {
    maps = {{"distill/rollout", {"rollout/*"}}, {"distill/teacher_forward", {"teacher_forward"}},
            {"distill/student_update", {"train/*"}}, {"distill/grad_sync", {"train/grad_sync"}},
            {"distill/optimizer", {"train/optimizer"}}};
  } else {  // grpo, ppo
    maps = {{p + "/rollout", {"rollout/*"}},           {p + "/reward", {"reward/*"}},
            {p + "/old_logprob", {"old_logprob"}},     {p + "/ref_logprob", {"ref_logprob"}},
            {p + "/values", {"critic_values"}},        {p + "/actor_update", {"actor_update/*"}},
            {p + "/grad_sync", {"actor_update/grad_sync"}}, {p + "/optimizer", {"actor_update/optimizer"}},
            {p + "/critic_update", {"critic_update/*"}}, {p + "/weight_sync", {"weight_sync"}}};
  }
  maps.insert(maps.begin() + 1, engine.begin(), engine.end());
  return maps;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Each rank's main-lane spans, by start.
using RankEvents = std::map<int64_t, std::vector<const trace::Event*>>;

RankEvents main_lane_spans(const std::vector<trace::TraceFile>& files) {
  RankEvents by_rank;
  for (const auto& f : files)
    for (const auto& ev : f.events)
      if (ev.ph == "X" && ev.cat != "comm" && ev.tid == 0) by_rank[ev.pid].push_back(&ev);
  for (auto& [rank, v] : by_rank)
    std::stable_sort(v.begin(), v.end(), [](const trace::Event* a, const trace::Event* b) { return a->ts_us < b->ts_us; });
  return by_rank;
}

// The windows one step covers on one rank: the stage's step spans inside its top-level span; on a rank that
// records no step spans (a role on ranks of its own), the whole stage as one window worth `steps` steps.
struct Window {
  double start = 0, end = 0, steps = 1;
};

std::vector<Window> step_windows(const std::vector<const trace::Event*>& events, const StageEstimate& e, int index) {
  const std::string step_name = e.stage + (e.unit == "iteration" ? "/iteration" : "/step");
  std::vector<Window> stages, steps;
  for (const trace::Event* ev : events)
    if (ev->name == e.stage && int(trace::arg_value(*ev, "stage_index")) == index)
      stages.push_back({ev->ts_us, ev->ts_us + ev->dur_us});
  for (const trace::Event* ev : events)
    if (ev->name == step_name)
      for (const Window& s : stages)
        if (ev->ts_us >= s.start && ev->ts_us + ev->dur_us <= s.end) steps.push_back({ev->ts_us, ev->ts_us + ev->dur_us});
  if (steps.size() >= 3) steps.erase(steps.begin());  // the first step warms up caches and allocators
  if (!steps.empty() || stages.empty()) return steps;
  for (Window& s : stages) s.steps = std::max(1.0, e.steps);
  return stages;
}

struct Measured {
  double median_s = std::nan("");
  int64_t samples = 0;
};

// Seconds of `span` per step on ranks [first, first + count): the median over their (step, rank) windows.
Measured measure(const RankEvents& by_rank, const StageEstimate& e, int index, const std::string& span,
                 int64_t first, int64_t count) {
  std::vector<double> per_step;
  for (auto it = by_rank.lower_bound(first); it != by_rank.end() && it->first < first + count; ++it) {
    const auto& events = it->second;
    for (const Window& w : step_windows(events, e, index)) {
      double sum = 0;
      bool seen = false;
      auto from = std::lower_bound(events.begin(), events.end(), w.start,
                                   [](const trace::Event* ev, double t) { return ev->ts_us < t; });
      for (auto ev = from; ev != events.end() && (*ev)->ts_us <= w.end; ++ev)
        if ((*ev)->name == span && (*ev)->ts_us + (*ev)->dur_us <= w.end + 1e-3) sum += (*ev)->dur_us, seen = true;
      if (seen) per_step.push_back(sum * 1e-6 / w.steps);
    }
  }
  return {median(per_step), int64_t(per_step.size())};
}

config::PipelineConfig run_config(const std::string& run_dir, int64_t world) {
  const std::string path = (stdfs::path(run_dir) / "config.resolved.yaml").string();
  if (!stdfs::exists(path))
    throw InputError(path + " is missing: --estimate needs the run's own config (a directory `hpcrl run` wrote)");
  config::ValidateOptions opt;
  opt.world = world;
  config::LoadResult res = config::check_pipeline_config(path, {}, opt);
  if (!res.ok())
    throw InputError(path + " does not validate for " + std::to_string(world) + " ranks (the traces' count): " +
                     res.diagnostics.errors.front().str());
  return res.config;
}

trace::SpanComparison row_of(const StageEstimate& e, const SpanMap& m) {
  trace::SpanComparison r;
  r.stage = e.stage;
  r.span = m.span;
  double predicted = 0;
  bool modelled = false;
  for (const auto& sp : e.spans) {
    if (std::none_of(m.predicted_by.begin(), m.predicted_by.end(),
                     [&](const std::string& p) { return matches(sp.name, p); }))
      continue;
    modelled = true;
    predicted += sp.cost.seconds();
    r.flops += sp.cost.flops;
    r.bytes += sp.cost.bytes;
  }
  // A span the model has no term for (a text reward, host work) keeps NaN: "not modelled", not 0 s.
  r.predicted_s = modelled ? predicted : std::nan("");
  for (const auto& p : m.predicted_by) r.predicted_from += (r.predicted_from.empty() ? "" : " + ") + p;
  if (!modelled) r.predicted_from = "not modelled";
  return r;
}
}  // namespace

trace::EstimateComparison compare_with_run(const std::string& run_dir, const std::vector<trace::TraceFile>& files,
                                           const HardwareProfile& hw) {
  const RankEvents by_rank = main_lane_spans(files);
  const int64_t world = by_rank.empty() ? 1 : by_rank.rbegin()->first + 1;
  const config::PipelineConfig cfg = run_config(run_dir, world);
  std::map<int, Shapes> measured;
  if (stdfs::exists(stdfs::path(run_dir) / "metrics.jsonl")) measured = measured_shapes(run_dir, cfg);
  const std::vector<StageEstimate> est = estimate_pipeline(cfg, world, hw, {}, measured);

  trace::EstimateComparison c;
  c.profile = hw.name;
  c.profile_path = hw.path;
  c.peak_flops = hw.peak_flops;
  c.peak_bandwidth = hw.memory_bandwidth;
  c.lengths = measured.empty() ? "the cost model's defaults (no metrics.jsonl)"
                               : "the means the run measured (metrics.jsonl), as plan --estimate --from-run";
  for (size_t i = 0; i < est.size(); ++i) {
    const StageEstimate& e = est[i];
    trace::SpanComparison step;
    step.stage = e.stage;
    step.span = e.stage + (e.unit == "iteration" ? "/iteration" : "/step");
    step.predicted_from = "stage (" + e.composition + ")";
    step.predicted_s = e.seconds;
    const Measured ms = measure(by_rank, e, int(i), step.span, 0, world);
    step.measured_s = ms.median_s;
    step.samples = ms.samples;
    if (!ms.samples) continue;  // the stage did not run (or was resumed past)
    if (e.unit == "step") {
      for (const auto& sp : e.spans) step.flops += sp.cost.flops;
      step.mfu = step.flops / (step.measured_s * hw.peak_flops);
    }
    c.rows.push_back(step);
    for (const SpanMap& m : span_maps(e)) {
      trace::SpanComparison r = row_of(e, m);
      int64_t first = 0, count = world;
      for (const auto& sp : e.spans)
        if (std::any_of(m.predicted_by.begin(), m.predicted_by.end(),
                        [&](const std::string& p) { return matches(sp.name, p); }))
          first = sp.first_rank, count = sp.ranks;
      const Measured mr = measure(by_rank, e, int(i), m.span, first, count);
      if (!mr.samples && std::isnan(r.predicted_s)) continue;  // neither recorded nor modelled
      r.measured_s = mr.median_s;
      r.samples = mr.samples;
      if (mr.samples && m.decode) r.bandwidth_utilisation = r.bytes / (r.measured_s * hw.memory_bandwidth);
      else if (mr.samples && r.flops > 0) r.mfu = r.flops / (r.measured_s * hw.peak_flops);
      c.rows.push_back(r);
    }
  }
  return c;
}

}  // namespace hpcrl::cost
