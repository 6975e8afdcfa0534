// TensorBoard event files: CRC-32C against published check values, the masked
// CRC and the protobuf bytes of one Event worked out by hand, and a file written
// by TensorBoardWriter read back by a decoder written here from the format alone
// (TFRecord framing, both CRCs, the protobuf wire format), so the writer's own
// encoders cannot vouch for themselves. tensorboard_reader_check.sh reads the same
// kind of file with Google's protobuf library.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "hpcrl/trace/metrics.h"
#include "hpcrl/trace/tensorboard.h"
#include "hpcrl/util/error.h"
#include "trace_test_support.h"

using namespace hpcrl;
using namespace trace_test;
namespace tb = hpcrl::trace::tensorboard;

namespace {

std::string bytes_of(std::initializer_list<unsigned char> b) { return std::string(b.begin(), b.end()); }

uint64_t le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s.at(at + i));
  return v;
}

// One protobuf field as it appears on the wire.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t scalar = 0;  // varint, fixed64 or fixed32 payload
  std::string bytes;    // length-delimited payload
};

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    unsigned char b = static_cast<unsigned char>(s.at(at++));
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

std::vector<Field> fields_of(const std::string& s) {
  std::vector<Field> out;
  for (size_t at = 0; at < s.size();) {
    Field f;
    uint64_t key = read_varint(s, at);
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.scalar = read_varint(s, at);
    } else if (f.wire == 1 || f.wire == 5) {
      int n = f.wire == 1 ? 8 : 4;
      f.scalar = le(s, at, n);
      at += n;
    } else if (f.wire == 2) {
      uint64_t n = read_varint(s, at);
      if (at + n > s.size()) throw std::runtime_error("length-delimited field runs past its message");
      f.bytes = s.substr(at, n);
      at += n;
    } else {
      throw std::runtime_error("wire type " + std::to_string(f.wire) + " is not used by Event");
    }
    out.push_back(f);
  }
  return out;
}

struct Scalar {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

struct EventFile {
  std::string file_version;
  double first_wall_time = 0;
  int64_t session_start_step = -1;  // -1: no session START record
  std::vector<Scalar> scalars;
};

// SessionLog{status}: the status enum's value (1 = START).
uint64_t session_status(const std::string& bytes) {
  auto fields = fields_of(bytes);
  if (fields.size() != 1 || fields[0].number != 1 || fields[0].wire != 0) throw std::runtime_error("SessionLog shape");
  return fields[0].scalar;
}

// The data of every TFRecord in `text`, after checking both masked CRCs.
std::vector<std::string> records_of(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    if (text.size() - at < 12) throw std::runtime_error("cut-off record header");
    uint64_t n = le(text, at, 8);
    if (le(text, at + 8, 4) != tb::masked_crc32c(text.substr(at, 8))) throw std::runtime_error("length CRC");
    if (text.size() - at - 12 < n + 4) throw std::runtime_error("cut-off record data");
    std::string data = text.substr(at + 12, n);
    if (le(text, at + 12 + n, 4) != tb::masked_crc32c(data)) throw std::runtime_error("data CRC");
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Summary{value{tag, simple_value}} with exactly one value, as the writer makes them.
void decode_summary(const std::string& bytes, Scalar& s) {
  auto values = fields_of(bytes);
  if (values.size() != 1 || values[0].number != 1 || values[0].wire != 2) throw std::runtime_error("Summary shape");
  for (const Field& f : fields_of(values[0].bytes)) {
    if (f.number == 1 && f.wire == 2) s.tag = f.bytes;
    else if (f.number == 2 && f.wire == 5) s.value = as_float(static_cast<uint32_t>(f.scalar));
    else throw std::runtime_error("unexpected Value field " + std::to_string(f.number));
  }
}

EventFile decode_file(const std::string& text) {
  EventFile file;
  auto records = records_of(text);
  for (size_t i = 0; i < records.size(); ++i) {
    Scalar s;
    std::string version;
    bool has_summary = false;
    uint64_t status = 0;
    for (const Field& f : fields_of(records[i])) {
      if (f.number == 1 && f.wire == 1) s.wall_time = as_double(f.scalar);
      else if (f.number == 2 && f.wire == 0) s.step = static_cast<int64_t>(f.scalar);
      else if (f.number == 3 && f.wire == 2) version = f.bytes;
      else if (f.number == 5 && f.wire == 2) decode_summary(f.bytes, s), has_summary = true;
      else if (f.number == 6 && f.wire == 2) status = session_status(f.bytes);
      else throw std::runtime_error("unexpected Event field " + std::to_string(f.number));
    }
    if (i == 0) {
      if (has_summary || version.empty()) throw std::runtime_error("first record is not the file_version event");
      file.file_version = version;
      file.first_wall_time = s.wall_time;
    } else if (i == 1) {
      if (status != 1 || has_summary || !version.empty()) throw std::runtime_error("second record is not a START");
      file.session_start_step = s.step;
    } else {
      if (!has_summary || !version.empty()) throw std::runtime_error("a later record is not a scalar event");
      file.scalars.push_back(s);
    }
  }
  return file;
}

std::vector<std::string> event_files(const stdfs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : stdfs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST(TensorBoard, Crc32cMatchesPublishedCheckValues) {
  EXPECT_EQ(tb::crc32c("123456789"), 0xE3069283u);  // the CRC-32C "check" value
  EXPECT_EQ(tb::crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, 32 bytes of 0xFF.
  EXPECT_EQ(tb::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(tb::crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

TEST(TensorBoard, MaskedCrcRotatesAndAddsTheConstant) {
  // crc = 0xE3069283. crc >> 15 keeps the top 17 bits: 0x1C60D. crc << 17 moves
  // the low 15 bits (0x9283 & 0x7FFF = 0x1283) to the top: 0x25060000. Their OR
  // is 0x2507C60D; + 0xA282EAD8 = 0xC78AB0E5 (no carry out of 32 bits).
  EXPECT_EQ(tb::masked_crc32c("123456789"), 0xC78AB0E5u);
}

TEST(TensorBoard, FramingIsLengthCrcDataCrc) {
  std::string framed = tb::frame_record("abc");
  ASSERT_EQ(framed.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(framed.substr(0, 8), bytes_of({3, 0, 0, 0, 0, 0, 0, 0}));  // uint64 little-endian
  EXPECT_EQ(le(framed, 8, 4), tb::masked_crc32c(framed.substr(0, 8)));
  EXPECT_EQ(framed.substr(12, 3), "abc");
  EXPECT_EQ(le(framed, 15, 4), tb::masked_crc32c("abc"));
}

TEST(TensorBoard, ScalarEventBytesWorkedByHand) {
  // Event{wall_time: 1.5, step: 300, summary{value{tag: "a/b", simple_value: 0.25}}}.
  // A key is (field << 3) | wire type: 1 fixed64, 0 varint, 2 length-delimited, 5 fixed32.
  std::string expected = bytes_of({
      0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // 1:fixed64; 1.5 = 0x3FF8000000000000, little-endian
      0x10, 0xAC, 0x02,                    // 2:varint; 300 = 0b10_0101100 -> 0x2C|0x80, 0x02
      0x2A, 0x0C,                          // 5:bytes, Summary of 12 bytes
      0x0A, 0x0A,                          //   Summary 1:bytes, Value of 10 bytes
      0x0A, 0x03, 'a', '/', 'b',           //     Value.tag 1:bytes, 3 bytes
      0x15, 0x00, 0x00, 0x80, 0x3E,        //     Value.simple_value 2:fixed32; 0.25f = 0x3E800000
  });
  EXPECT_EQ(tb::encode_scalar_event(1.5, 300, "a/b", 0.25f), expected);
}

TEST(TensorBoard, StepEdgeCasesAndFileVersionBytes) {
  // Step 0 is proto3's default and left out: wall_time then summary.
  std::string zero = tb::encode_scalar_event(1.5, 0, "a/b", 0.25f);
  EXPECT_EQ(zero.substr(9, 2), bytes_of({0x2A, 0x0C}));
  // int64 -1 is 2^64 - 1 as a varint: nine 0xFF groups and a final 0x01.
  std::string minus = tb::encode_scalar_event(1.5, -1, "a/b", 0.25f);
  EXPECT_EQ(minus.substr(9, 11), bytes_of({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  // Event{wall_time: 1.5, file_version: "brain.Event:2"}: 3:bytes = 0x1A, 13 bytes.
  std::string version = bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 0x0D}) + "brain.Event:2";
  EXPECT_EQ(tb::encode_file_version_event(1.5), version);
}

TEST(TensorBoard, SessionStartBytesWorkedByHand) {
  // Event{wall_time: 1.5, step: 300, session_log{status: START}}: 6:bytes = 0x32, SessionLog of 2 bytes,
  // whose status 1:varint = 0x08 is START = 1.
  std::string expected = bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x10, 0xAC, 0x02, 0x32, 0x02, 0x08, 0x01});
  EXPECT_EQ(tb::encode_session_start_event(1.5, 300), expected);
  // At step 0 the step is left out, as proto3 does.
  EXPECT_EQ(tb::encode_session_start_event(1.5, 0), bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x32, 0x02, 0x08, 0x01}));
}

TEST(TensorBoard, FileStartsWithASessionStartAtTheGivenStep) {
  TempDir dir("tensorboard_session");
  trace::TensorBoardWriter fresh(dir.str() + "/a", 0), resumed(dir.str() + "/b", 0, 17);
  resumed.write("sft", 17, {{"loss", 1.0}});
  EXPECT_EQ(decode_file(read_text(fresh.path())).session_start_step, 0);
  EventFile b = decode_file(read_text(resumed.path()));
  EXPECT_EQ(b.session_start_step, 17);
  ASSERT_EQ(b.scalars.size(), 1u);
  EXPECT_EQ(b.scalars[0].step, 17);
}

TEST(TensorBoard, MetricsWriterKeepsOneRunPerStageAndMarksTheRestartAfterTruncation) {
  TempDir dir("tensorboard_metrics");
  const std::string tb_root = dir.str() + "/tb";
  {
    trace::MetricsWriter m(dir.str() + "/metrics.jsonl", 0);
    m.mirror_to_tensorboard(tb_root);
    for (int64_t step = 1; step <= 4; ++step) m.write("sft", 0, step, {{"loss", 1.0 / double(step)}});
    m.write("grpo", 1, 1, {{"loss", 0.5}});
  }
  ASSERT_EQ(event_files(tb_root), (std::vector<std::string>{"00-sft", "01-grpo"}));
  // The job restarts from a checkpoint at sft step 2: steps 3, 4 and the grpo line are dropped.
  trace::MetricsWriter m(dir.str() + "/metrics.jsonl", 0);
  m.mirror_to_tensorboard(tb_root);
  m.truncate_after(0, 2);
  m.write("sft", 0, 3, {{"loss", 0.25}});
  auto files = event_files(tb_root + "/00-sft");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(decode_file(read_text(tb_root + "/00-sft/" + files[0])).session_start_step, 0) << "the first job's start";
  EventFile restarted = decode_file(read_text(tb_root + "/00-sft/" + files[1]));
  EXPECT_EQ(restarted.session_start_step, 3) << "TensorBoard drops the first job's steps >= 3";
  ASSERT_EQ(restarted.scalars.size(), 1u);
  EXPECT_EQ(restarted.scalars[0].value, 0.25f);
}

TEST(TensorBoard, FileRoundTripsThroughAnIndependentDecoder) {
  TempDir dir("tensorboard");
  std::string sub = dir.str() + "/run/tb";
  double before = unix_now();
  trace::TensorBoardWriter w(sub, 0);
  ASSERT_TRUE(w.active());
  w.write("sft", 1, {{"loss", 2.5}, {"lr", 1e-3}});
  w.write("grpo", 0, {{"reward/mean", 0.1}, {"kl", std::nan("")}, {"big", 1e39},
                      {"inf", std::numeric_limits<double>::infinity()}, {"neg", -3.0}});
  w.write("", int64_t{1} << 40, {{"plain", 1.0 / 3}});
  w.write("grpo", -2, {});
  // On disk before the writer flushes or closes: what a crashed run keeps.
  EventFile f = decode_file(read_text(w.path()));
  EXPECT_EQ(f.file_version, "brain.Event:2");
  EXPECT_EQ(f.session_start_step, 0);
  EXPECT_NEAR(f.first_wall_time, before, 60);
  ASSERT_EQ(f.scalars.size(), 5u) << "NaN, inf and a value beyond float32 are skipped";
  std::vector<std::tuple<std::string, int64_t, float>> got, want = {
      {"sft/loss", 1, 2.5f}, {"sft/lr", 1, 1e-3f}, {"grpo/reward/mean", 0, 0.1f}, {"grpo/neg", 0, -3.0f},
      {"plain", int64_t{1} << 40, static_cast<float>(1.0 / 3)}};
  for (const Scalar& s : f.scalars) {
    got.emplace_back(s.tag, s.step, s.value);
    EXPECT_GE(s.wall_time, f.first_wall_time);
    EXPECT_NEAR(s.wall_time, unix_now(), 60);
  }
  EXPECT_EQ(got, want);
  w.flush();
}

TEST(TensorBoard, FileNamedAsTensorFlowDoesAndNeverShared) {
  TempDir dir("tensorboard_name");
  trace::TensorBoardWriter a(dir.str(), 0), b(dir.str(), 0);
  auto names = event_files(dir.path);
  ASSERT_EQ(names.size(), 2u) << "two writers, two files, even within one second";
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(names[0].rfind(prefix, 0), 0u) << names[0];
  int64_t seconds = std::stoll(names[0].substr(prefix.size()));
  EXPECT_NEAR(static_cast<double>(seconds), unix_now(), 60);
  std::string host = names[0].substr(names[0].find('.', prefix.size()) + 1);
  EXPECT_FALSE(host.empty());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(stdfs::path(a.path()).parent_path(), dir.path);
}

TEST(TensorBoard, OnlyRankZeroWrites) {
  TempDir dir("tensorboard_rank");
  std::string sub = dir.str() + "/tb";
  trace::TensorBoardWriter w(sub, 1);
  EXPECT_FALSE(w.active());
  EXPECT_TRUE(w.path().empty());
  w.write("sft", 1, {{"loss", 1}});
  w.flush();
  EXPECT_FALSE(stdfs::exists(sub)) << "other ranks touch nothing";
}

TEST(TensorBoard, UnusableDirectoryIsARuntimeErrorNamingIt) {
  TempDir dir("tensorboard_bad");
  std::string file = dir.str() + "/not_a_dir";
  write_text(file, "x");
  for (const std::string& bad : {file, file + "/tb"}) {
    try {
      trace::TensorBoardWriter w(bad, 0);
      FAIL() << bad;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(TensorBoard, EmptyMetricNameIsACallerBug) {
  TempDir dir("tensorboard_empty");
  trace::TensorBoardWriter w(dir.str(), 0);
  EXPECT_THROW(w.write("sft", 1, {{"", 1.0}}), RuntimeError);
}
