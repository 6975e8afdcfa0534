// The training half of `hpcrl report` (report.h): what a run learned, read from
// its run directory next to the traces:
//   - metrics.jsonl: per stage, the learning curves over steps (reward with its
//     spread, held-out accuracy, KL, entropy, response length, loss, grad norm:
//     the curve metrics below that the stage wrote);
//   - config.resolved.yaml: the run's resolved config, shown as written;
//   - eval_samples.jsonl: the last evaluation's sample generations and rewards,
//     one JSON object per line {"stage", "kind", "step", "prompt", "response",
//     "answer", "reward"}; the last evaluation is the largest (stage, step).
// Several runs overlay their curves (`hpcrl report RUN_A RUN_B ...`): stage i of
// every run on one chart, one series per run named by its directory.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::trace {

// One metrics.jsonl line that names its stage and an integer step.
struct MetricsLine {
  std::string stage;
  int stage_index = 0;  // 0 when the line has none
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> values;  // numeric members but stage_index/step/time; null -> NaN
};

// One line of eval_samples.jsonl.
struct EvalSample {
  int stage = 0;     // the stage index
  std::string kind;  // "sft", "grpo", ...
  int64_t step = 0;
  std::string prompt, response, answer;
  double reward = std::nan("");  // NaN when the line has none (or null)
};

// What a run learned, as its run directory records it.
struct RunResults {
  std::string label;                // the run's directory name: its name in the legend
  std::vector<MetricsLine> metrics;  // in file order
  bool has_config = false;          // config.resolved.yaml exists
  std::string config_yaml;          // its text, as written
  bool has_samples = false;         // eval_samples.jsonl exists
  std::vector<EvalSample> samples;  // the last evaluation's lines, in file order
  int64_t samples_skipped = 0;      // eval_samples.jsonl lines that are not sample objects
};

// A metric drawn as a learning curve, when a stage wrote it.
struct CurveMetric {
  const char* metric;  // the metrics.jsonl key
  const char* title;   // the chart's title and y-axis name
  const char* spread;  // a key whose value is drawn as a ± band around the curve ("" for none)
};

// In page order. Every other metric (seconds/..., lr, tokens_per_s, ...) is not a
// learning curve: the systems sections and TensorBoard show those.
inline constexpr CurveMetric kCurveMetrics[] = {
    {"reward/mean", "reward (mean ± std of the batch's samples)", "reward/std"},
    {"eval/accuracy", "held-out accuracy", ""},
    {"accuracy", "accuracy of the batch's samples", ""},
    {"kl", "KL to the reference", ""},
    {"entropy", "entropy", ""},
    {"response_len/mean", "response length (tokens, mean)", ""},
    {"eval/response_len", "held-out response length (tokens)", ""},
    {"loss", "loss", ""},
    {"eval/loss", "held-out loss", ""},
    {"grad_norm", "gradient norm", ""},
    {"critic/loss", "critic loss", ""},
    {"mismatch/logprob_abs_mean", "train/inference log-prob mismatch (mean |Δ|)", ""},
    {"mismatch/kl", "train/inference KL (k3)", ""},
};

struct CurvePoint {
  int64_t step = 0;
  double value = 0;
  double spread = std::nan("");  // the band's half-width; NaN when the line has none
};

// One run's points of a curve: the lines of the stage that hold a finite value
// of the metric (null, a non-finite value, is a gap), in step order (file order
// among equal steps).
struct CurveSeries {
  size_t run = 0;     // index into the runs: its colour
  std::string label;  // the run's label
  std::vector<CurvePoint> points;
};

struct LearningCurve {
  std::string metric, title, spread;  // as in kCurveMetrics
  std::vector<CurveSeries> series;    // the runs that wrote the metric in this stage, in run order
};

// Stage i of every run: the stage's name (names joined by " / " where the runs
// differ) and its curves in kCurveMetrics order.
struct StageCurves {
  int stage_index = 0;
  std::string stage;
  std::vector<LearningCurve> curves;
};

// metrics.jsonl's lines with a string "stage" and an integer "step"; other
// lines (a line cut off by a crash, not an object) are left out.
std::vector<MetricsLine> parse_metrics_lines(const std::string& metrics_jsonl);

// The last evaluation's lines of eval_samples.jsonl (those of the largest
// (stage, step)), in file order; lines that are not objects with an integer
// "stage" and "step" are counted in `skipped`.
std::vector<EvalSample> last_evaluation_samples(const std::string& eval_samples_jsonl, int64_t& skipped);

// Fills `run`'s config and samples from RUN_DIR/config.resolved.yaml and
// RUN_DIR/eval_samples.jsonl (has_* false for a file that does not exist).
void read_config_and_samples(const std::string& run_dir, RunResults& run);

// The curves of every stage index any run wrote, in stage order.
std::vector<StageCurves> learning_curves(const std::vector<RunResults>& runs);

}  // namespace hpcrl::trace
