// Where a stage is in its data, as a value that goes into every checkpoint.
// Each epoch visits every example once in an order that depends only on
// (seed, epoch) — a splitmix64-seeded Fisher–Yates with unbiased bounded
// draws, not std::shuffle, whose output differs between standard libraries —
// so a cursor {epoch, index, seed} restored on another machine continues with
// exactly the same batches.
//
// Batches are global: next_batch(n) takes the next n positions of the epoch
// order, rolling into the next epoch when one ends (a batch may straddle two
// epochs; no example is dropped or repeated within an epoch). With data
// parallelism every dp rank calls next_batch(n, rank, world) with the same n:
// it advances the same shared cursor and returns that rank's contiguous slice
// of the global batch, so the dp ranks' slices are disjoint and together are
// exactly the global batch a single rank would have taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hpcrl::io {

struct DataCursor {
  uint64_t epoch = 0;
  uint64_t index = 0;  // position within the epoch order, in [0, size)
  uint64_t seed = 0;
  uint64_t size = 0;   // dataset size the cursor belongs to (checked on restore)
  uint64_t content = 0;  // content_hash of that dataset (checked on restore; 0 = not recorded)

  // {"epoch": e, "index": i, "seed": s, "size": n, "content": h} ("content" only when recorded)
  nlohmann::json to_json() const;
  // InputError naming `where` (e.g. the checkpoint file) on a missing or
  // non-integer field, or an index outside [0, size).
  static DataCursor from_json(const nlohmann::json& j, const std::string& where);

  bool operator==(const DataCursor& o) const {
    return epoch == o.epoch && index == o.index && seed == o.seed && size == o.size && content == o.content;
  }
};

class DataSampler {
 public:
  // shuffle=false visits 0..size-1 in order every epoch (eval, debugging).
  // `content`: the dataset's content_hash, checked when a checkpoint's cursor is restored.
  DataSampler(size_t dataset_size, uint64_t seed, bool shuffle = true, uint64_t content = 0);

  // The next `n` example indices of the global batch (n ≥ 1).
  std::vector<size_t> next_batch(size_t n);
  // This dp rank's slice [rank·n/world, (rank+1)·n/world) of the next global
  // batch of `n`; InputError if world does not divide n.
  std::vector<size_t> next_batch(size_t n, int rank, int world);

  const DataCursor& cursor() const { return cursor_; }
  // Continues from `c` (its seed included). InputError if c.size differs from
  // this dataset's size, or its content hash from this dataset's (both recorded):
  // the checkpoint belongs to other data.
  void restore(const DataCursor& c, const std::string& where);

  // The visiting order of one epoch (a permutation of 0..size-1).
  std::vector<size_t> epoch_order(uint64_t epoch) const;

 private:
  const std::vector<size_t>& order_for(uint64_t epoch);

  DataCursor cursor_;
  bool shuffle_;
  uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<size_t> cached_order_;
};

}  // namespace hpcrl::io
