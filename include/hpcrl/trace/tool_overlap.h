// How much of a run's tool-call time the rollout engine spent decoding other
// rows (docs/tools.md): every call is a "rollout/tool" span on its rank's
// tools lane, from the call's start to the engine taking its reply, and every
// decode step a "rollout/decode" span on the main lane. Over all ranks:
//   calls, call_s        the tool spans and the sum of their durations
//   decode_s             the decode spans' total
//   decode_during_calls  the part of call_s that a decode step of the same
//                        rank overlapped (calls in flight together each count
//                        their own overlap), as a share of call_s: the call
//                        time continuous batching hid behind other rows' work
// A trace without tool spans has no table.
#pragma once

#include <optional>
#include <vector>

#include "hpcrl/trace/reader.h"

namespace hpcrl::trace {

struct ToolOverlapStats {
  int ranks = 0;  // ranks that recorded tool spans
  int64_t calls = 0;
  double call_s = 0, decode_s = 0;
  double hidden_share = 0;  // decode-overlapped share of call_s
};

std::optional<ToolOverlapStats> tool_overlap(const std::vector<TraceFile>& files);

}  // namespace hpcrl::trace
