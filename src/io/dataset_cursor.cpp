// Deterministic epoch shuffling with a checkpointable cursor (see
// dataset_cursor.h). The generator (dataset_rng.h) is fully specified, so the
// order is the same with any compiler and standard library.
#include "hpcrl/io/dataset_cursor.h"

#include <numeric>

#include "dataset_rng.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"

namespace hpcrl::io {
namespace {

uint64_t get_u64(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  bool ok = it != j.end() && (it->is_number_unsigned() || (it->is_number_integer() && it->get<long long>() >= 0));
  if (!ok) {
    throw InputError(where + ": data cursor field '" + key + "' is " +
                     (it == j.end() ? std::string("missing") : "not a non-negative integer (" + it->dump() + ")") +
                     "; the checkpoint's data state is damaged — resume from an earlier checkpoint");
  }
  return it->get<uint64_t>();
}

}  // namespace

nlohmann::json DataCursor::to_json() const {
  nlohmann::json j = {{"epoch", epoch}, {"index", index}, {"seed", seed}, {"size", size}};
  if (content != 0) j["content"] = content;
  return j;
}

DataCursor DataCursor::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) {
    throw InputError(where + ": data cursor must be a JSON object {epoch, index, seed, size}, got " + j.dump());
  }
  DataCursor c;
  c.epoch = get_u64(j, "epoch", where);
  c.index = get_u64(j, "index", where);
  c.seed = get_u64(j, "seed", where);
  c.size = get_u64(j, "size", where);
  if (j.contains("content")) c.content = get_u64(j, "content", where);  // absent in checkpoints before it was kept
  if (c.size == 0 || c.index >= c.size) {
    throw InputError(where + ": data cursor index " + std::to_string(c.index) + " is outside the dataset of size " +
                     std::to_string(c.size) + "; the checkpoint's data state is damaged");
  }
  return c;
}

DataSampler::DataSampler(size_t dataset_size, uint64_t seed, bool shuffle, uint64_t content) : shuffle_(shuffle) {
  HPCRL_CHECK_INPUT(dataset_size > 0, "cannot sample from an empty dataset");
  cursor_.seed = seed;
  cursor_.size = dataset_size;
  cursor_.content = content;
}

std::vector<size_t> DataSampler::epoch_order(uint64_t epoch) const {
  std::vector<size_t> order(cursor_.size);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle_) return order;
  uint64_t state = detail::stream_state(cursor_.seed, epoch);
  for (size_t i = order.size() - 1; i > 0; --i) {
    size_t j = static_cast<size_t>(detail::bounded(state, i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

const std::vector<size_t>& DataSampler::order_for(uint64_t epoch) {
  if (cached_epoch_ != epoch) {
    cached_order_ = epoch_order(epoch);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::vector<size_t> DataSampler::next_batch(size_t n) {
  HPCRL_CHECK(n > 0, "batch size must be at least 1");
  std::vector<size_t> out;
  out.reserve(n);
  while (out.size() < n) {
    const auto& order = order_for(cursor_.epoch);
    while (out.size() < n && cursor_.index < cursor_.size) out.push_back(order[cursor_.index++]);
    if (cursor_.index == cursor_.size) {
      ++cursor_.epoch;
      cursor_.index = 0;
    }
  }
  return out;
}

std::vector<size_t> DataSampler::next_batch(size_t n, int rank, int world) {
  HPCRL_CHECK(world >= 1 && rank >= 0 && rank < world, "rank " << rank << " outside a dp group of " << world);
  HPCRL_CHECK_INPUT(n % static_cast<size_t>(world) == 0,
                    "global batch " << n << " is not divisible by the data-parallel size " << world
                                    << "; choose a batch that is a multiple of " << world);
  std::vector<size_t> global = next_batch(n);
  size_t per = n / static_cast<size_t>(world);
  return std::vector<size_t>(global.begin() + static_cast<long>(per * rank),
                             global.begin() + static_cast<long>(per * (rank + 1)));
}

void DataSampler::restore(const DataCursor& c, const std::string& where) {
  if (c.size != cursor_.size) {
    throw InputError(where + ": the data cursor was saved for a dataset of " + std::to_string(c.size) +
                     " examples but this dataset has " + std::to_string(cursor_.size) +
                     "; resume with the same data (and length limits) as the checkpointed run");
  }
  if (c.content != 0 && cursor_.content != 0 && c.content != cursor_.content) {
    throw InputError(where + ": the data changed since this checkpoint: the same " + std::to_string(c.size) +
                     " examples in number, but other ones (content hash " + std::to_string(c.content) + " then, " +
                     std::to_string(cursor_.content) +
                     " now); resume with the data the run was started with, or start a new run");
  }
  if (c.index >= c.size) {
    throw InputError(where + ": data cursor index " + std::to_string(c.index) + " is outside the dataset of size " +
                     std::to_string(c.size));
  }
  const uint64_t content = cursor_.content;
  cursor_ = c;
  if (cursor_.content == 0) cursor_.content = content;  // a cursor from before hashes were kept
}

}  // namespace hpcrl::io
