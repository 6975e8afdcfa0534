// metrics.jsonl: one JSON object per stage step, the run's learning curve
// (DESIGN §10): {"stage", "stage_index", "step", "time", ...metrics} with metric
// names such as "loss", "reward/mean", "eval/accuracy", "seconds/<span>".
// Each line reaches the file in one write() as soon as it is written, so `tail -f`
// and a crashed run both see every finished step. Only rank 0 touches the file.
// Non-finite metric values are written as null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::trace {

class TensorBoardWriter;

using Metrics = std::vector<std::pair<std::string, double>>;

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

  // For resume from a checkpoint taken at (stage_index, step): keeps the lines of
  // earlier stages and of that stage up to and including `step`, drops the rest
  // (and a cut-off last line from a crash), rewriting the file atomically. A line
  // that is not a metrics object is an InputError naming path:line.
  void truncate_after(int stage_index, int64_t step);

  // Every later line is also written as TensorBoard scalars "<stage>/<metric>" at its step.
  void mirror_to(std::unique_ptr<TensorBoardWriter> tensorboard);

 private:
  void open_append();

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace hpcrl::trace
