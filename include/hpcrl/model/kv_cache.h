// The key/value cache of incremental decoding: per layer, the keys (after RoPE)
// and values of every token seen so far, for this rank's local KV heads. A
// prefill call fills it, each decode call appends one step. Kept deliberately
// plain — tensors that grow along the time axis — so the rollout engine can
// select rows (finished sequences), copy or drop it without knowing more.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace hpcrl::model {

struct LayerKvCache {
  at::Tensor k;  // [B, Hkv_local, T_cached, D] (undefined before the first call)
  at::Tensor v;  // [B, Hkv_local, T_cached, D]
};

struct KvCache {
  std::vector<LayerKvCache> layers;

  // Tokens already cached (0 when empty).
  int64_t length() const { return layers.empty() || !layers[0].k.defined() ? 0 : layers[0].k.size(2); }
  // Keeps only batch rows `rows` ([N] int64), e.g. to drop finished sequences.
  void select_rows(const at::Tensor& rows) {
    for (auto& l : layers)
      if (l.k.defined()) {
        l.k = l.k.index_select(0, rows);
        l.v = l.v.index_select(0, rows);
      }
  }
};

}  // namespace hpcrl::model
