// TensorBoard event-file writer (tensorboard.h, which spells out the format).
// The protobuf encoding is done by hand because three message types with five
// fields do not justify a protobuf build dependency; every integer is emitted
// byte by byte in little-endian order, so the files are the same on any host.
#include "hpcrl/trace/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "hpcrl/util/check.h"
#include "hpcrl/util/crc32c.h"
#include "hpcrl/util/error.h"

namespace hpcrl::trace {
namespace tensorboard {
namespace {

void put_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

void put_fixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// Base-128, low group first. A negative int64 goes through uint64 and so takes
// ten bytes, which is protobuf's int64 (not sint64) encoding.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_key(std::string& out, uint32_t field, uint32_t wire_type) { put_varint(out, (field << 3) | wire_type); }

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 1);
  put_fixed64(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 5);
  put_fixed32(out, bits);
}

}  // namespace

uint32_t crc32c(std::string_view data) { return util::crc32c(data); }

// TFRecord masks the CRC because a CRC of data that itself embeds CRCs is weak.
uint32_t masked_crc32c(std::string_view data) {
  uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view data) {
  std::string length;
  put_fixed64(length, data.size());
  std::string out = length;
  put_fixed32(out, masked_crc32c(length));
  out.append(data.data(), data.size());
  put_fixed32(out, masked_crc32c(data));
  return out;
}

std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, version);  // step 0 is proto3's default and so left out
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_float(summary_value, 2, value);  // in a oneof, so written even when 0
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {  // proto3 leaves defaults out; matching it keeps re-encoding byte-identical
    put_key(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  put_bytes(event, 5, summary);
  return event;
}

}  // namespace tensorboard

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string name(buf);
  for (char& c : name)
    if (c == '/') c = '_';  // it becomes part of a file name
  return name;
}

// Opens a fresh file named as TensorFlow names it. A second writer in the same
// second on the same host (a quick resume, a test) gets ".1", ".2", ... rather
// than mixing its records into the first file; the suffix still sorts after it,
// which is the order TensorBoard reads a run's files in.
int open_new_event_file(const std::string& dir, std::string& path) {
  std::string base = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(unix_now())) + "." +
                     host_name();
  for (int n = 0;; ++n) {
    path = n == 0 ? base : base + "." + std::to_string(n);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST || n >= 1000) return fd;
  }
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(std::string dir, int rank) {
  if (rank != 0) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw RuntimeError("cannot create TensorBoard directory " + dir + ": " + ec.message() +
                       " (give a path that is, or can be created as, a writable directory)");
  std::string path;
  int fd = open_new_event_file(dir, path);
  int open_errno = errno;  // before the message's allocations can touch it
  if (fd < 0)
    throw RuntimeError("cannot create TensorBoard event file " + path + ": " + std::strerror(open_errno) +
                       " (check that " + dir + " is a writable directory)");
  fd_ = fd;
  path_ = std::move(path);
  try {
    append(tensorboard::frame_record(tensorboard::encode_file_version_event(unix_now())));
  } catch (...) {  // no destructor runs for a throwing constructor
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ < 0) return;
  ::fdatasync(fd_);  // best effort: a failure here has no one to report to
  ::close(fd_);
}

void TensorBoardWriter::write(const std::string& stage, int64_t step,
                              const std::vector<std::pair<std::string, double>>& metrics) {
  if (fd_ < 0) return;
  double now = unix_now();
  std::string records;
  for (const auto& [name, value] : metrics) {
    HPCRL_CHECK(!name.empty(), "empty metric name in the " << stage << " step " << step
                                                           << " metrics; give every metric a name");
    // float32 cannot hold these, and TensorBoard cannot plot them anyway.
    if (!std::isfinite(value) || std::fabs(value) > FLT_MAX) continue;
    std::string tag = stage.empty() ? name : stage + "/" + name;
    records += tensorboard::frame_record(
        tensorboard::encode_scalar_event(now, step, tag, static_cast<float>(value)));
  }
  if (!records.empty()) append(records);
}

void TensorBoardWriter::flush() {
  if (fd_ < 0) return;
  if (::fdatasync(fd_) != 0)
    throw RuntimeError("cannot flush " + path_ + " to disk: " + std::strerror(errno) + " (disk full or failing?)");
}

// One write() per call, as in metrics.cpp: a record is then either fully in the
// file or not there at all, short of the disk filling up mid-write.
void TensorBoardWriter::append(const std::string& bytes) {
  ssize_t n;
  do {
    n = ::write(fd_, bytes.data(), bytes.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(bytes.size()))
    throw RuntimeError("cannot append to " + path_ + ": " + (n < 0 ? std::strerror(errno) : "short write") +
                       " (disk full?)");
}

}  // namespace hpcrl::trace
