// Reads a Chrome trace file as hpcrl writes it (a JSON array of events, one per
// line) and tolerates what a crash leaves: no closing ']' and a last event cut
// off mid-write. Such a cut-off event is counted in `skipped`, never guessed at.
// Anything else that is not a trace (garbage between events, an event that is
// not an object, an "X" event without ts/dur) is an InputError naming
// file:line:col. The object form {"traceEvents": [...]} is read when complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/trace/trace.h"

namespace hpcrl::trace {

struct Event {
  std::string name;
  std::string cat;
  std::string ph;        // "X" complete, "M" metadata, ...
  int64_t pid = 0;       // rank
  int64_t tid = 0;       // lane
  double ts_us = 0;
  double dur_us = 0;
  Args args;             // the numeric args
  std::string group;     // the string arg "group" (comm events)
};

struct TraceFile {
  std::string path;
  std::vector<Event> events;  // every complete event, in file order
  int64_t skipped = 0;        // events cut off at the end of the file (crash mid-write)
  bool terminated = false;    // the closing ']' is present
  size_t valid_end = 0;       // byte offset just past the last complete event (or the '[')
};

// The numeric arg `key` of `e` (0 when the event has none).
double arg_value(const Event& e, const char* key);

// Reads and parses `path` (InputError when missing, empty or malformed).
TraceFile read_trace_file(const std::string& path);
// Parses trace text; `path` only names the source in errors.
TraceFile parse_trace(const std::string& text, const std::string& path);

}  // namespace hpcrl::trace
