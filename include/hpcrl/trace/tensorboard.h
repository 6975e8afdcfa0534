// TensorBoard event files for the scalar learning curve, beside metrics.jsonl:
// `tensorboard --logdir RUN_DIR/...` plots the same per-step metrics with no
// conversion step. The format is TensorFlow's, written by hand (no protobuf or
// TensorFlow dependency):
//
// File `events.out.tfevents.<unix-seconds>.<hostname>` is a sequence of TFRecords:
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | length bytes of data        | uint32 masked_crc32c(data)
// with crc32c = CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and
// masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32), both
// little-endian. Each record's data is one serialized tensorflow.Event:
//   Event      { double wall_time = 1; int64 step = 2;
//                oneof what { string file_version = 3; Summary summary = 5; SessionLog session_log = 6; } }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; oneof value { float simple_value = 2; } }
//   SessionLog { SessionStatus status = 1; }   (enum SessionStatus: START = 1)
// The first record is Event{wall_time, file_version: "brain.Event:2"}, the second
// Event{wall_time, step: S, session_log{status: START}}; then one
// Event{wall_time, step, summary{value{tag, simple_value}}} per scalar. Fields
// are written in field-number order and a zero step is left out, exactly as
// protobuf itself serializes proto3, so an independent decoder that re-encodes
// a record gets the same bytes (tests/trace/read_tfevents.py checks this).
//
// The START marker is how TensorBoard handles a restarted job (its event
// accumulator, for files of version 2): the first START of a run (a directory)
// is the job starting and changes nothing; every later one is a restart at step
// S, and TensorBoard drops every point of every tag in that run with step ≥ S,
// so steps a crashed job wrote after its last checkpoint are shown once, as the
// resumed job re-did them. (TensorBoard's Rust loader instead drops a tag's
// points from the first step that repeats; both agree here.)
//
// Tags are "<stage>/<metric>" (e.g. "grpo/reward/mean"): TensorBoard groups
// charts by the part before the first '/', so each stage gets its own section.
// simple_value is a float32: values are rounded to it; values that are not
// finite, or too large for float32 (they would become inf), are skipped.
// Only rank 0 writes; other ranks get an inactive writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpcrl::trace {

class TensorBoardWriter {
 public:
  // On rank 0 creates `dir` (and parents) and a new event file in it, and writes
  // the file_version record and a session START at `session_start_step`: the
  // first step this job writes, after which a restarted job's earlier points are
  // dropped (see above); a RuntimeError names the path when either fails. Other
  // ranks get an inactive writer whose calls do nothing.
  TensorBoardWriter(std::string dir, int rank, int64_t session_start_step = 0);
  ~TensorBoardWriter();  // flush(), errors swallowed (a destructor must not throw)
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  bool active() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }  // the event file; empty when inactive

  // One scalar Event per finite metric, tagged "<stage>/<metric>" ("<metric>"
  // when stage is empty), stamped with the current Unix time. All records of a
  // call reach the file in one write(), so a crashed process keeps every call
  // that returned. Metric names must be non-empty (a RuntimeError: caller bug).
  void write(const std::string& stage, int64_t step, const std::vector<std::pair<std::string, double>>& metrics);

  // Asks the kernel to put what was written on disk (fdatasync), so a node that
  // dies keeps it too; write() alone already survives a process crash.
  void flush();

 private:
  void append(const std::string& bytes);

  std::string path_;
  int fd_ = -1;
};

// The encoders the writer is built from, exposed so tests can check them byte by byte.
namespace tensorboard {

uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);
// TFRecord framing of one record's data (see the header comment).
std::string frame_record(std::string_view data);
// A serialized Event{wall_time, file_version} (the first record of a file).
std::string encode_file_version_event(double wall_time, std::string_view version = "brain.Event:2");
// A serialized Event{wall_time, step, session_log{status: START}}.
std::string encode_session_start_event(double wall_time, int64_t step);
// A serialized Event{wall_time, step, summary{value{tag, simple_value}}}.
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

}  // namespace tensorboard

}  // namespace hpcrl::trace
