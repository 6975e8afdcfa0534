// Cutting a ZeRO shard out of shards saved by a group of another size (reshard.h).
#include "hpcrl/optim/reshard.h"

#include <torch/utils.h>

#include <algorithm>
#include <memory>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

bool SavedState::has(const std::string& key) const {
  const std::vector<std::string> all = names();
  return std::find(all.begin(), all.end(), key) != all.end();
}

std::vector<int64_t> SavedState::int64s(const std::string& key) const {
  const at::Tensor t = load(key).to(at::kLong).contiguous();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

bool is_replica(const SavedState& saved, const std::string& key, const std::vector<int64_t>& replica,
                const std::string& what) {
  HPCRL_CHECK_INPUT(saved.has(key) && !replica.empty(), saved.source << ": " << what << " does not say which model "
                    "shard it is (saved before resharding was built); resume with the data-parallel size that wrote it");
  return saved.int64s(key) == replica;
}

SavedState SavedState::in_memory(std::map<std::string, at::Tensor> state, std::string source) {
  auto held = std::make_shared<const std::map<std::string, at::Tensor>>(std::move(state));
  return {std::move(source),
          [held] {
            std::vector<std::string> names;
            for (const auto& kv : *held) names.push_back(kv.first);
            return names;
          },
          [held](const std::string& name) { return held->at(name); }};
}

namespace {
// Where each bucket's owned slice starts in a rank's shard, for a group of `size`.
struct Cut {
  std::vector<int64_t> slice, offset;  // Sb and its start in the shard, per bucket
  int64_t shard = 0;                   // S = Σ Sb

  Cut(const std::vector<int64_t>& bucket_numels, int size) {
    for (int64_t numel : bucket_numels) {
      slice.push_back((numel + size - 1) / size);
      offset.push_back(shard);
      shard += slice.back();
    }
  }
};
}  // namespace

at::Tensor reshard(const std::vector<int64_t>& bucket_numels, int saved_size,
                   const std::function<at::Tensor(int)>& saved_shard, int size, int rank,
                   const at::TensorOptions& options) {
  HPCRL_CHECK(saved_size >= 1 && size >= 1 && rank >= 0 && rank < size,
              "reshard: rank " << rank << " of " << size << " from a group of " << saved_size);
  const Cut before(bucket_numels, saved_size), after(bucket_numels, size);
  torch::NoGradGuard no_grad;
  at::Tensor out = at::zeros({after.shard}, options);
  for (int q = 0; q < saved_size; ++q) {
    at::Tensor held;  // loaded at its first overlap
    for (size_t b = 0; b < bucket_numels.size(); ++b) {
      // Bucket elements [lo, hi) that saved rank q held and this rank owns.
      const int64_t lo = std::max(q * before.slice[b], rank * after.slice[b]);
      const int64_t hi = std::min({(q + 1) * before.slice[b], (rank + 1) * after.slice[b], bucket_numels[b]});
      if (lo >= hi) continue;
      if (!held.defined()) {
        held = saved_shard(q);
        HPCRL_CHECK_INPUT(held.dim() == 1 && held.numel() == before.shard,
                          "saved optimizer shard of group rank " << q << " has " << held.numel()
                          << " elements where its layout gives " << before.shard << "; the checkpoint is damaged");
      }
      out.narrow(0, after.offset[b] + lo - rank * after.slice[b], hi - lo)
          .copy_(held.narrow(0, before.offset[b] + lo - q * before.slice[b], hi - lo));
    }
  }
  return out;
}

}  // namespace hpcrl::optim
