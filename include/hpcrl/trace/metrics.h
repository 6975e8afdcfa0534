// metrics.jsonl: one JSON object per stage step, the run's learning curve
// (docs/tracing.md): {"stage", "stage_index", "step", "time", ...metrics} with metric
// names such as "loss", "reward/mean", "eval/accuracy", "seconds/<span>".
// Each line reaches the file in one write() as soon as it is written, so `tail -f`
// and a crashed run both see every finished step. Only rank 0 touches the file.
// Non-finite metric values are written as null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::trace {

class TensorBoardWriter;

using Metrics = std::vector<std::pair<std::string, double>>;

// One generation of an evaluation, as eval_samples.jsonl keeps it.
struct SampleLine {
  std::string prompt, response, answer;
  double reward = 0;
};

class MetricsWriter {
 public:
  // Appends to `path` (created with its directory) when rank == 0; other ranks
  // get an inactive writer whose calls do nothing.
  MetricsWriter(std::string path, int rank);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  bool active() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // One line; "time" is the current Unix time in seconds. Metric names must not
  // repeat the four fixed keys (a RuntimeError: it is a caller bug).
  void write(const std::string& stage, int stage_index, int64_t step, const Metrics& metrics);

  // A few generations of the evaluation at (stage_index, step), one line each in
  // eval_samples.jsonl beside metrics.jsonl: {"stage": stage_index, "kind": stage,
  // "step", "prompt", "response", "answer", "reward"} (docs/tracing.md).
  void write_samples(const std::string& stage, int stage_index, int64_t step, const std::vector<SampleLine>& samples);

  // For resume from a checkpoint taken at (stage_index, step): keeps the lines of
  // earlier stages and of that stage up to and including `step`, drops the rest
  // (and a cut-off last line from a crash), rewriting the file atomically. A line
  // that is not a metrics object is an InputError naming path:line. The stage's
  // TensorBoard run then starts its new event file with a session START at
  // step + 1, so TensorBoard drops the points the dropped lines had written.
  // eval_samples.jsonl loses its lines past the same point.
  void truncate_after(int stage_index, int64_t step);

  // Every later line is also written as TensorBoard scalars "<stage>/<metric>" at
  // its step, in one TensorBoard run per stage: `root`/NN-<stage>/ (NN the stage
  // index), created with the stage's first line. A run per stage because a
  // restart marker drops the later steps of every tag of its run, and steps
  // count from 0 in each stage. Creates `root` now, so an unusable directory
  // fails before training (RuntimeError naming it).
  void mirror_to_tensorboard(const std::string& root);

 private:
  void open_append();
  TensorBoardWriter& tensorboard_of(const std::string& stage, int stage_index);

  std::string path_;
  int fd_ = -1;
  std::string samples_path_;  // eval_samples.jsonl beside path_
  std::string tensorboard_root_;                                   // "" = no mirror
  std::map<int, std::unique_ptr<TensorBoardWriter>> tensorboard_;  // by stage index
  std::map<int, int64_t> restart_step_;                            // by stage index, after truncate_after
};

}  // namespace hpcrl::trace
