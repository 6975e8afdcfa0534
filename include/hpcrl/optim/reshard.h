// Optimizer state saved by a run with another data-parallel size, and the cut
// of a ZeRO shard out of it.
//
// A ZeRO group of W ranks owns, per bucket of Nb elements, the slice
// [r·Sb, (r+1)·Sb) with Sb = ceil(Nb / W) (shard_layout.h). The buckets follow
// the parameters, the stage and bucket_mb, never W, so the saved shards of a
// group of W ranks laid end to end per bucket are the same flat state a group
// of W' ranks owns, cut in other places: a rank of the new group copies its
// slices out of the saved shards that hold them. Plain AdamW state is whole on
// every data-parallel rank, so any saved rank of the same model shard serves.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hpcrl::optim {

// One saved rank's optimizer state, read on demand (a checkpoint file), so a
// rank reads only the tensors it needs and holds one saved shard at a time.
struct SavedState {
  std::string source;  // for errors: the file it comes from
  std::function<std::vector<std::string>()> names;
  std::function<at::Tensor(const std::string&)> load;
  bool has(const std::string& key) const;
  // Tensor `key` (a layout, bucket sizes, a replica key) as integers.
  std::vector<int64_t> int64s(const std::string& key) const;
  // A state held in memory (an Optimizer's state(), or one read whole).
  static SavedState in_memory(std::map<std::string, at::Tensor> state, std::string source);
};

// Whether `saved` is the state of model shard `replica` (its tensor `key`).
// InputError naming `what` when `saved` or this run has no replica key: the
// state was written before resharding existed and loads only at its own dp.
bool is_replica(const SavedState& saved, const std::string& key, const std::vector<int64_t>& replica,
                const std::string& what);

// The [S] shard that rank `rank` of a group of `size` owns over buckets of
// `bucket_numels` elements (in shard order), taken from the [S_q] shards
// `saved_shard(q)` of ranks q = 0 .. saved_size - 1 of a group that sharded the
// same buckets; each saved shard is loaded once, only if it holds any of the
// elements. Padding elements are zero, as a fresh shard's are.
at::Tensor reshard(const std::vector<int64_t>& bucket_numels, int saved_size,
                   const std::function<at::Tensor(int)>& saved_shard, int size, int rank,
                   const at::TensorOptions& options);

}  // namespace hpcrl::optim
