// The per-rank trace writer behind trace.h: one process-wide Writer guarded by
// a mutex (the comm thread records too), serialising events into a buffer that
// goes to rank-NNNNN.json in whole writes. The file is an open JSON array from
// the first write on ("[\n" + metadata), events are separated by ",\n" before
// each one, and stop() closes it with "]": a crash leaves a valid prefix that
// Perfetto and `hpcrl trace summarize` read (reader.cpp).
//
// Device-timed spans (device_timer.h) cannot be written when they end: their
// duration is known only once the device has passed the end marker. They wait
// in `pending` and are written by whichever later call finds them ready.
#include "hpcrl/trace/trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <set>

#include "hpcrl/trace/device_timer.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::trace {
namespace {

struct Epoch {
  std::chrono::steady_clock::time_point steady;
  int64_t unix_us;  // Unix time of `steady`, so files from different nodes line up
};
const Epoch& epoch() {
  static const Epoch e{std::chrono::steady_clock::now(),
                       std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()};
  return e;
}

struct PendingSpan {
  std::string name;
  Args args;
  int lane;
  DeviceTimer::Marker start, end;
};

struct Writer {
  std::mutex mu;
  int fd = -1;
  std::string dir, path;
  int rank = 0;
  Options options;
  std::string buffer;
  int buffered_events = 0;
  bool need_comma = false;
  double last_write_us = 0;
  std::map<int, std::string> lane_names;  // set by name_lane()
  std::set<int> named_lanes;              // lanes with a thread_name event in this file
  DeviceTimer* timer = nullptr;
  uint64_t timer_generation = 0;
  std::atomic<bool> timer_installed{false};
  DeviceTimer::Marker anchor = 0;
  double anchor_us = 0;
  int paused = 0;  // pause_device_timer() calls not yet resumed
  std::vector<PendingSpan> pending;
  bool atexit_registered = false;
};

// Never destroyed: spans on other threads and the atexit handler may outlive statics.
Writer& writer() {
  static Writer* w = new Writer;
  return *w;
}

thread_local int t_depth = 0;  // open active ScopedSpans on this thread

void append_escaped(std::string& out, const std::string& s) {
  bool plain = std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c != '"' && c != '\\'; });
  if (plain) {
    out += s;
    return;
  }
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
}

void append_int(std::string& out, long long v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);  // shortest round-trip form
}

// Microseconds with exactly three decimals (nanoseconds), without printf.
void append_us3(std::string& out, long long whole_us, long long frac_ns) {
  append_int(out, whole_us);
  char frac[4] = {'.', static_cast<char>('0' + frac_ns / 100), static_cast<char>('0' + frac_ns / 10 % 10),
                  static_cast<char>('0' + frac_ns % 10)};
  out.append(frac, 4);
}

// Unix-epoch microseconds, exact to the nanosecond: the local offset is split
// before adding the ~1.7e15 µs epoch, which a double would round to 0.25 µs.
void append_ts(std::string& out, double local_us) {
  double whole = std::floor(local_us);
  long long frac = std::llround((local_us - whole) * 1000.0);
  long long us = epoch().unix_us + static_cast<long long>(whole) + frac / 1000;
  append_us3(out, us, frac % 1000);
}

void append_dur(std::string& out, double dur_us) {
  long long ns = dur_us > 0 ? std::llround(dur_us * 1000.0) : 0;
  append_us3(out, ns / 1000, ns % 1000);
}

void start_event(Writer& w) {
  if (w.need_comma) w.buffer += ",\n";
  w.need_comma = true;
  ++w.buffered_events;
}

std::string lane_name(const Writer& w, int lane) {
  auto it = w.lane_names.find(lane);
  if (it != w.lane_names.end()) return it->second;
  if (lane == kMainLane) return "main";
  if (lane == kCommLane) return "comm";
  if (lane >= kPipelineLaneBase) return "pp stage " + std::to_string(lane - kPipelineLaneBase);
  return "lane " + std::to_string(lane);
}

void append_metadata(Writer& w, const char* what, int tid, const char* key, const std::string* text, int number) {
  start_event(w);
  w.buffer += "{\"name\":\"";
  w.buffer += what;
  w.buffer += "\",\"ph\":\"M\",\"pid\":";
  append_int(w.buffer, w.rank);
  w.buffer += ",\"tid\":";
  append_int(w.buffer, tid);
  w.buffer += ",\"args\":{\"";
  w.buffer += key;
  w.buffer += "\":";
  if (text) {
    w.buffer += '"';
    append_escaped(w.buffer, *text);
    w.buffer += '"';
  } else {
    append_int(w.buffer, number);
  }
  w.buffer += "}}";
}

void name_lane_in_file(Writer& w, int lane) {
  std::string name = lane_name(w, lane);
  append_metadata(w, "thread_name", lane, "name", &name, 0);
  append_metadata(w, "thread_sort_index", lane, "sort_index", nullptr, lane);
  w.named_lanes.insert(lane);
}

// One "X" event. `group` non-null: a comm event with args {"group", "bytes"}.
void append_complete(Writer& w, const std::string& name, int lane, double ts_us, double dur_us, const Args& args,
                     const std::string* group = nullptr, int64_t bytes = 0) {
  if (!w.named_lanes.count(lane)) name_lane_in_file(w, lane);
  start_event(w);
  std::string& b = w.buffer;
  b += "{\"name\":\"";
  append_escaped(b, name);
  b += group ? "\",\"cat\":\"comm\"" : "\",\"cat\":\"span\"";
  b += ",\"ph\":\"X\",\"pid\":";
  append_int(b, w.rank);
  b += ",\"tid\":";
  append_int(b, lane);
  b += ",\"ts\":";
  append_ts(b, ts_us);
  b += ",\"dur\":";
  append_dur(b, dur_us);
  if (group || !args.empty()) {
    b += ",\"args\":{";
    bool first = true;
    if (group) {
      b += "\"group\":\"";
      append_escaped(b, *group);
      b += "\",\"bytes\":";
      append_int(b, bytes);
      first = false;
    }
    for (const auto& [key, value] : args) {
      if (!first) b += ',';
      first = false;
      b += '"';
      append_escaped(b, key);
      b += "\":";
      append_number(b, value);
    }
    b += '}';
  }
  b += '}';
}

void close_file(Writer& w) {
  if (w.fd >= 0) ::close(w.fd);
  w.fd = -1;
  w.buffer.clear();
  w.buffered_events = 0;
  w.named_lanes.clear();
  detail::g_enabled.store(false, std::memory_order_relaxed);
  detail::g_comm_enabled.store(false, std::memory_order_relaxed);
}

// Writes the buffer. A failing disk turns tracing off with one error line rather
// than throwing out of a span's destructor.
void write_buffer(Writer& w) {
  w.last_write_us = now_us();
  size_t off = 0;
  while (off < w.buffer.size()) {
    ssize_t n = ::write(w.fd, w.buffer.data() + off, w.buffer.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      spdlog::error("trace: cannot write {}: {}; tracing is off for the rest of this run (free disk space?)", w.path,
                    std::strerror(errno));
      close_file(w);
      return;
    }
    off += static_cast<size_t>(n);
  }
  w.buffer.clear();
  w.buffered_events = 0;
}

void resolve(Writer& w, const PendingSpan& p) {
  double ts = w.anchor_us + 1000.0 * w.timer->elapsed_ms(w.anchor, p.start);
  double dur = 1000.0 * w.timer->elapsed_ms(p.start, p.end);
  // A device error makes the times NaN: leave the span out rather than invent a length.
  if (w.fd >= 0 && std::isfinite(ts) && std::isfinite(dur)) append_complete(w, p.name, p.lane, ts, dur, p.args);
  w.timer->release(p.start);
  w.timer->release(p.end);
}

// Writes device-timed spans the device has finished; with `wait`, all of them.
void resolve_pending(Writer& w, bool wait) {
  if (w.pending.empty()) return;
  std::vector<PendingSpan> still;
  for (auto& p : w.pending) {
    if (wait) w.timer->synchronize(p.end);
    if (wait || w.timer->ready(p.end)) resolve(w, p);
    else still.push_back(std::move(p));
  }
  w.pending.swap(still);
}

void maybe_flush(Writer& w, double now, bool force) {
  if (w.fd < 0) return;
  if (w.timer && w.paused == 0) resolve_pending(w, false);
  if (w.buffer.empty()) return;
  if (force || w.buffered_events >= w.options.flush_events ||
      now - w.last_write_us >= w.options.flush_interval_s * 1e6)
    write_buffer(w);
}

// At exit the CUDA runtime may already be torn down, so device-timed spans still
// in flight are dropped (stop() before exit waits for them).
void stop_at_exit() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.fd < 0) return;
  if (!w.pending.empty())
    std::fprintf(stderr, "trace: %zu device-timed spans were still in flight at exit and are not in %s\n",
                 w.pending.size(), w.path.c_str());
  w.pending.clear();
  w.buffer += "\n]\n";
  write_buffer(w);
  close_file(w);
}

// A forked child (a data-loader process, a test) inherits the open file and the
// buffer; if it wrote them the parent's trace would get duplicates and a stray
// ']'. The child is single-threaded here, so no lock (another thread of the
// parent may have held it at the fork).
void disable_in_child() {
  Writer& w = writer();
  detail::g_enabled.store(false, std::memory_order_relaxed);
  detail::g_comm_enabled.store(false, std::memory_order_relaxed);
  if (w.fd >= 0) ::close(w.fd);
  w.fd = -1;
  w.buffer.clear();
  w.pending.clear();
  new (&w.mu) std::mutex();
}

// Opens `path` for appending after the last complete event of an earlier run.
int open_for_append(Writer& w) {
  std::string text = fs::read_file(w.path, "trace file");
  TraceFile old = parse_trace(text, w.path);
  HPCRL_CHECK_INPUT(text[text.find_first_not_of(" \t\r\n")] == '[',  // parse_trace rejected empty files
                    w.path << " is a {\"traceEvents\": ...} trace, which cannot be appended to; move it away"
                           << " or start the trace without append");
  std::error_code ec;
  std::filesystem::resize_file(w.path, old.valid_end, ec);
  if (ec) throw RuntimeError("cannot truncate " + w.path + " for appending: " + ec.message());
  if (old.skipped)
    spdlog::warn("trace: {} ended inside an event (crashed run); dropped that event and appending", w.path);
  w.need_comma = !old.events.empty();
  return ::open(w.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch().steady).count();
}

void start(const std::string& dir, int rank, const Options& options) {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.fd >= 0) {
    if (w.dir == dir && w.rank == rank) return;
    HPCRL_CHECK(false, "tracing already writes " << w.path << "; call trace::stop() before tracing into " << dir
                                                  << " as rank " << rank);
  }
  if (!options.chrome) return;
  HPCRL_CHECK(rank >= 0, "trace rank must be >= 0, got " << rank);
  HPCRL_CHECK(options.flush_events >= 1, "trace flush_events must be >= 1");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create trace directory " + dir + ": " + ec.message());
  char file[32];
  std::snprintf(file, sizeof file, "rank-%05d.json", rank);
  w.dir = dir;
  w.rank = rank;
  w.options = options;
  w.path = (std::filesystem::path(dir) / file).string();
  w.buffer.clear();
  w.buffered_events = 0;
  w.named_lanes.clear();
  if (options.append && std::filesystem::exists(w.path)) {
    w.fd = open_for_append(w);
  } else {
    w.fd = ::open(w.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    w.buffer = "[\n";
    w.need_comma = false;
  }
  if (w.fd < 0) throw RuntimeError("cannot open trace file " + w.path + ": " + std::strerror(errno));
  std::string process = "rank " + std::to_string(rank);
  append_metadata(w, "process_name", 0, "name", &process, 0);
  append_metadata(w, "process_sort_index", 0, "sort_index", nullptr, rank);
  name_lane_in_file(w, kMainLane);
  name_lane_in_file(w, kCommLane);
  write_buffer(w);
  if (w.fd < 0) throw RuntimeError("cannot write trace file " + w.path);
  if (!w.atexit_registered) {
    std::atexit(stop_at_exit);
    ::pthread_atfork(nullptr, nullptr, disable_in_child);
    w.atexit_registered = true;
  }
  detail::g_comm_enabled.store(options.comm, std::memory_order_relaxed);
  detail::g_enabled.store(true, std::memory_order_relaxed);
}

void stop() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  detail::g_enabled.store(false, std::memory_order_relaxed);
  detail::g_comm_enabled.store(false, std::memory_order_relaxed);
  if (w.fd < 0) return;
  if (w.timer) resolve_pending(w, true);
  w.buffer += "\n]\n";
  write_buffer(w);
  close_file(w);
}

void flush() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  maybe_flush(w, now_us(), true);
}

std::string file_path() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.fd >= 0 ? w.path : std::string();
}

void name_lane(int lane, const std::string& name) {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  w.lane_names[lane] = name;
  if (w.fd >= 0) name_lane_in_file(w, lane);
}

void set_device_timer(DeviceTimer* timer) {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.timer) {
    resolve_pending(w, true);
    w.timer->release(w.anchor);
  }
  w.timer = timer;
  ++w.timer_generation;
  if (timer) {
    w.anchor = timer->record();
    timer->synchronize(w.anchor);
    w.anchor_us = now_us();
  }
  w.timer_installed.store(timer != nullptr, std::memory_order_relaxed);
}

void pause_device_timer() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  ++w.paused;
}

void resume_device_timer() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  HPCRL_CHECK(w.paused > 0, "trace::resume_device_timer() without a pause_device_timer() before it");
  --w.paused;
}

bool device_timer_paused() {
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.paused > 0;
}

void complete(const std::string& name, double start_us, double dur_us, int lane, const Args& args) {
  if (!enabled()) return;
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.fd < 0) return;
  append_complete(w, name, lane, start_us, dur_us, args);
  maybe_flush(w, now_us(), false);
}

void comm(const std::string& op, const std::string& group, int64_t bytes, double start_us, double dur_us) {
  if (!comm_enabled()) return;
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.fd < 0) return;
  append_complete(w, op, kCommLane, start_us, dur_us, {}, &group, bytes);
  maybe_flush(w, now_us(), false);
}

void ScopedSpan::begin(std::string name, Args args, int lane, double start_us) {
  Open& o = open_.emplace();
  o.name = std::move(name);
  o.args = std::move(args);
  o.lane = lane;
  ++t_depth;
  Writer& w = writer();
  // A TimedSpan (start_us given) stays host-timed: its metric reads the host clock.
  if (start_us < 0 && lane != kCommLane && w.timer_installed.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.timer && w.paused == 0) {
      o.device_start = w.timer->record();
      o.device_gen = w.timer_generation;
    }
  }
  o.start_us = start_us >= 0 ? start_us : now_us();
}

void ScopedSpan::end() {
  double end_us = now_us();
  bool top_level = --t_depth == 0;
  Open& o = *open_;
  Writer& w = writer();
  std::lock_guard<std::mutex> lock(w.mu);
  bool same_timer = o.device_gen != 0 && w.timer && o.device_gen == w.timer_generation;
  if (w.fd < 0) {
    if (same_timer) w.timer->release(o.device_start);
    return;
  }
  if (same_timer && w.paused > 0) {  // no end marker now: the span keeps its host times
    w.timer->release(o.device_start);
    append_complete(w, o.name, o.lane, o.start_us, end_us - o.start_us, o.args);
  } else if (same_timer) {
    w.pending.push_back({std::move(o.name), std::move(o.args), o.lane, o.device_start, w.timer->record()});
  } else if (o.device_gen == 0) {
    append_complete(w, o.name, o.lane, o.start_us, end_us - o.start_us, o.args);
  }  // else: started under a timer since uninstalled; its marker is gone with it
  maybe_flush(w, end_us, top_level);
}

}  // namespace hpcrl::trace
