// Where each gradient and optimizer-state element of a parameter set lives when
// a group of W ranks shards it (ZeRO-1, ZeRO-2).
//
// The parameters are cut into buckets. A bucket's gradients are laid end to
// end in one flat buffer of Nb elements padded to W·Sb, Sb = ceil(Nb / W), and
// reduce-scattered as one message: rank r receives, and owns, elements
// [r·Sb, (r+1)·Sb) of every bucket. A rank's shard is its Sb-slices of all
// buckets, in bucket order: S = Σ Sb elements. The optimizer state is kept in
// that order, so a checkpoint of it is only meaningful with the same layout
// (load_state checks W, N, S and, bucketed, the bucket sizes).
//
// ZeRO-1 uses one bucket of every parameter in registration order (its reduce
// runs once, after the backward); ZeRO-2 uses buckets of about bucket_bytes in
// reverse registration order, the order the backward finishes gradients in, so
// each can be reduced while the backward goes on and its full gradients freed.
// ZeRO-3 uses one bucket per forward unit (a decoder layer, or the embeddings
// and heads), so a bucket's all-gathered flat buffer is the unit's parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hpcrl/distributed/plan_constants.h"

namespace hpcrl::optim {

// ZeRO-2's default buckets (optim.bucket_mb, as the dp all-reduce's; a larger
// parameter is a bucket of its own) and how many reduced buckets may wait at
// once (GradReduceScatter). `hpcrl plan` counts their buffers from these; they
// are defined in distributed/plan_constants.h, which it reads them from.
using dist::kZero2BucketBytes;
using dist::kZero2BucketsInFlight;

struct ShardLayout {
  struct Bucket {
    std::vector<size_t> params;    // indices into the parameter list, in flat-buffer order
    std::vector<int64_t> offsets;  // where each starts in the bucket's flat buffer
    int64_t numel = 0;             // Nb: real elements (the buffer has W·Sb)
    int64_t shard = 0;             // Sb = ceil(Nb / W)
    int64_t shard_offset = 0;      // where this bucket's Sb owned elements start in the rank's shard
    int64_t unit = 0;              // ZeRO-3: the forward unit it holds (by_units)
  };
  // A run of one parameter's elements inside this rank's shard.
  struct Segment {
    size_t param;
    int64_t param_offset, shard_offset, length;
  };

  // One bucket holding every parameter in registration order.
  static ShardLayout whole(const std::vector<int64_t>& numels, int size, int rank);
  // `alone` (empty, or one flag per parameter): parameters that get a bucket
  // of their own in the layouts below. Such a parameter's shard slice then
  // depends only on its size and the group, not on its neighbours, so two
  // parameter sets that share it (the tied embedding on the first and the last
  // pipeline stage) own the same elements of it and can sum gradient shards.
  //
  // Buckets of at most `bucket_elements` (a larger parameter gets a bucket of
  // its own), filled from the last parameter to the first.
  static ShardLayout bucketed(const std::vector<int64_t>& numels, int64_t bucket_elements, int size, int rank,
                              const std::vector<bool>& alone = {});
  // One bucket per distinct value of units[k] (the unit of parameter k), from
  // the highest unit to the lowest: the order a backward finishes them in when
  // unit u's forward runs before unit u+1's. Inside a bucket, registration
  // order; a unit's `alone` parameters come first, one bucket each.
  static ShardLayout by_units(const std::vector<int64_t>& numels, const std::vector<int64_t>& units, int size,
                              int rank, const std::vector<bool>& alone = {});

  int size = 1, rank = 0;
  std::vector<Bucket> buckets;
  std::vector<Segment> segments;  // this rank's owned elements, by shard offset
  int64_t numel = 0;              // N = Σ Nb
  int64_t shard = 0;              // S = Σ Sb

 private:
  void finish(const std::vector<int64_t>& numels);  // shards, shard offsets and segments from the buckets
};

}  // namespace hpcrl::optim
