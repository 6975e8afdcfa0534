// Predicted beside measured, span by span: what `hpcrl report RUN_DIR --estimate
// PROFILE` shows on its page and `hpcrl trace summarize RUN_DIR --estimate PROFILE`
// prints (text and --json). The numbers are made by the cost model
// (cost/run_comparison.h: it reads the run's config and lengths, estimates, and
// measures the same spans in the traces); this header only holds and words them,
// so the trace module stays free of the cost model.
//
// Per row, for one stage and one trace span name, per step (SFT, distillation) or
// iteration (GRPO, PPO):
//   measured_s             the median over the stage's steps (the first left out when
//                          there are three or more) and the role's ranks of the span's
//                          seconds inside that step
//   predicted_s            the estimate's seconds of the spans it maps to (predicted_from)
//   mfu                    model FLOP utilisation of a training or forward span: the
//                          estimate's matmul FLOPs of the step on one rank (2 per
//                          multiply-add, work_depth.h) / (measured_s · the profile's peak FLOP/s)
//   bandwidth_utilisation  of decode: the bytes a step must read (weights / tp, the KV
//                          cache, the logits) / (measured_s · the profile's peak bytes/s)
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcrl::trace {

struct SpanComparison {
  std::string stage;           // "grpo"
  std::string span;            // the trace span: "grpo/iteration", "grpo/rollout", "rollout/decode"
  std::string predicted_from;  // the estimate's spans summed: "rollout/prefill + rollout/decode", or "stage"
  int64_t samples = 0;         // (step, rank) pairs the median is over
  double measured_s = std::nan("");
  double predicted_s = std::nan("");
  double flops = 0, bytes = 0;  // per rank and step, from the estimate
  double mfu = std::nan("");
  double bandwidth_utilisation = std::nan("");
  double ratio() const { return predicted_s / measured_s; }  // NaN when either is missing
};

struct EstimateComparison {
  std::string profile, profile_path;
  double peak_flops = 0, peak_bandwidth = 0;  // the profile's, the denominators of mfu and bandwidth_utilisation
  std::string lengths;                        // where the estimate's lengths came from
  std::vector<SpanComparison> rows;           // by stage, the step row first
  bool empty() const { return rows.empty(); }
};

// One JSON object: {profile, profile_path, peak_flops, peak_bandwidth, lengths, rows: [{stage, span,
// predicted_from, samples, measured_s, predicted_s, ratio, flops, bytes, mfu, bandwidth_utilisation}]}
// (NaN as null).
std::string comparison_json(const EstimateComparison& c);
// A Markdown section: a heading, the profile and one table row per span.
std::string comparison_markdown(const EstimateComparison& c);

}  // namespace hpcrl::trace
