// Preallocated slot KV cache (kv_slots.h).
#include "hpcrl/rollout/kv_slots.h"

#include <torch/utils.h>

#include <algorithm>
#include <utility>

#include "hpcrl/model/attention.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

KvSlots::KvSlots(const model::DecoderModel& m, int64_t slots, int64_t capacity)
    : slots_(slots), capacity_(capacity), length_(slots, 0) {
  HPCRL_CHECK(slots >= 1 && capacity >= 1, "KV slots need slots >= 1 and capacity >= 1, got " << slots << " x "
                                                                                             << capacity);
  const ModelArch& arch = m.arch();
  // Generation ignores sp (each sp rank decodes on its own), so heads split over tp only.
  const int64_t kv_heads = model::attention_layout(arch, m.parallel_context().tp_size(), 1).kv_heads;
  const at::Tensor& w = m.model->embed_tokens->weight;
  auto options = w.options().requires_grad(false);
  for (int64_t l = 0; l < arch.num_layers; ++l) {
    k_.push_back(at::zeros({slots, kv_heads, capacity, arch.head_dim}, options));
    v_.push_back(at::zeros({slots, kv_heads, capacity, arch.head_dim}, options));
  }
}

void KvSlots::set_length(int64_t r, int64_t n) {
  HPCRL_CHECK(r >= 0 && r < slots_ && n >= 0 && n <= capacity_,
              "slot " << r << " length " << n << " outside " << slots_ << " slots x " << capacity_ << " tokens");
  length_[r] = n;
}

void KvSlots::clear() { std::fill(length_.begin(), length_.end(), 0); }

at::Tensor KvSlots::lengths(int64_t rows) const {
  std::vector<int64_t> v(length_.begin(), length_.begin() + rows);
  return at::tensor(v, at::kLong).to(k_.front().device());
}

void KvSlots::move(int64_t from, int64_t to) { move(std::vector<int64_t>{from}, std::vector<int64_t>{to}); }

void KvSlots::move(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  HPCRL_CHECK(from.size() == to.size(), "moving " << from.size() << " slots into " << to.size());
  std::vector<int64_t> source, target, length;  // the moves that change a slot
  int64_t columns = 0;                          // the longest source's tokens: every move copies that many
  for (size_t i = 0; i < from.size(); ++i) {
    HPCRL_CHECK(from[i] >= 0 && from[i] < slots_ && to[i] >= 0 && to[i] < slots_,
                "a move of slot " << from[i] << " into " << to[i] << " outside " << slots_ << " slots");
    if (from[i] == to[i]) continue;
    source.push_back(from[i]);
    target.push_back(to[i]);
    length.push_back(length_[from[i]]);
    columns = std::max(columns, length_[from[i]]);
  }
  std::vector<int64_t> sorted = target;
  std::sort(sorted.begin(), sorted.end());
  HPCRL_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "two moves into one slot");
  if (columns > 0) {
    const at::Device device = k_.front().device();
    const at::Tensor s = at::tensor(source, at::kLong).to(device), t = at::tensor(target, at::kLong).to(device);
    for (std::vector<at::Tensor>* buffers : {&k_, &v_})
      for (at::Tensor& buffer : *buffers) {
        // Columns past a shorter source's length are copied too: past its target's length, no row reads them.
        at::Tensor cached = buffer.narrow(2, 0, columns);
        cached.index_copy_(0, t, cached.index_select(0, s));
      }
  }
  for (size_t i = 0; i < target.size(); ++i) length_[target[i]] = length[i];
}

void KvSlots::swap(int64_t a, int64_t b) {
  if (a == b) return;
  const int64_t n = std::max(length_[a], length_[b]);
  for (std::vector<at::Tensor>* buffers : {&k_, &v_})
    for (at::Tensor& buffer : *buffers) {
      at::Tensor a_cols = buffer[a].narrow(1, 0, n), b_cols = buffer[b].narrow(1, 0, n);
      at::Tensor kept = a_cols.clone();
      a_cols.copy_(b_cols);
      b_cols.copy_(kept);
    }
  std::swap(length_[a], length_[b]);
}

SlotCache KvSlots::copy_out(int64_t r) const {
  SlotCache c;
  c.length = length_[r];
  for (size_t l = 0; l < k_.size(); ++l) {
    c.k.push_back(k_[l][r].narrow(1, 0, c.length).clone());
    c.v.push_back(v_[l][r].narrow(1, 0, c.length).clone());
  }
  return c;
}

void KvSlots::copy_in(int64_t r, const SlotCache& c) {
  HPCRL_CHECK(c.k.size() == k_.size() && c.v.size() == v_.size() && c.length <= capacity_,
              "a kept cache of " << c.k.size() << " layers and " << c.length << " tokens for slots of " << k_.size()
                                 << " layers and " << capacity_ << " tokens");
  for (size_t l = 0; l < k_.size(); ++l) {
    const auto want = std::vector<int64_t>{k_[l].size(1), c.length, k_[l].size(3)};
    HPCRL_CHECK(c.k[l].sizes() == want && c.v[l].sizes() == want,
                "a kept cache's layer " << l << " is " << c.k[l].sizes() << ", the slots' " << at::IntArrayRef(want));
    k_[l][r].narrow(1, 0, c.length).copy_(c.k[l]);
    v_[l][r].narrow(1, 0, c.length).copy_(c.v[l]);
  }
  set_length(r, c.length);
}

int64_t KvSlots::bytes() const {
  int64_t b = 0;
  for (size_t l = 0; l < k_.size(); ++l) b += (k_[l].numel() + v_[l].numel()) * k_[l].element_size();
  return b;
}

}  // namespace hpcrl::rollout
