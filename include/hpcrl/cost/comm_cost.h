// Seconds of a collective from its bytes, its group and the link it crosses
// (the α–β model: each of a ring's steps pays the link latency α and moves
// its share of the bytes at bandwidth β). Groups follow the mesh order of
// docs/communication.md (tp innermost, then sp, dp, pp), so whether a group crosses nodes
// follows from its size and stride.
#pragma once

#include <cstdint>

#include "hpcrl/cost/hardware_profile.h"

namespace hpcrl::cost {

// A group of `size` ranks `stride` apart: crosses nodes when it spans more than one node's ranks.
bool crosses_nodes(int64_t size, int64_t stride, int gpus_per_node);

// Ring all-reduce of `bytes` (each rank's buffer) over `size` ranks: 2(n−1)/n·bytes/β + 2(n−1)·α.
double all_reduce_seconds(double bytes, int64_t size, const Link& link);
// All-gather / reduce-scatter of a `bytes` result over `size` ranks: (n−1)/n·bytes/β + (n−1)·α.
double all_gather_seconds(double bytes, int64_t size, const Link& link);
// `bytes` in, bytes/size out per rank: a ring moves what an all-gather of the result moves.
double reduce_scatter_seconds(double bytes, int64_t size, const Link& link);
// All-to-all of `bytes` per rank: (n−1)/n·bytes/β + (n−1)·α.
double all_to_all_seconds(double bytes, int64_t size, const Link& link);
// One message: bytes/β + α.
double send_seconds(double bytes, const Link& link);
// A pipelined broadcast to `size` ranks: bytes/β + ⌈log2 n⌉·α.
double broadcast_seconds(double bytes, int64_t size, const Link& link);

}  // namespace hpcrl::cost
