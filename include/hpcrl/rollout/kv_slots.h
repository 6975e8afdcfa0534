// The rollout engine's key/value cache: one preallocated [S, Hkv, capacity, D]
// buffer per layer for keys and one for values (this tp rank's KV heads), with
// S batch slots. Column c of a slot holds the token at position c of that
// slot's sequence, so a decode step writes one column per row in place and no
// step ever copies the cache (the model's own KvCache grows by concatenation,
// which copies the whole cache every step: fine for training-side tools, the
// dominant cost of long batched decoding). Rows are ragged on the right: slot r
// holds length(r) tokens and attention masks the columns past it, so slots of
// different lengths share the buffer without padding or shifting, and a
// finished slot is refilled by overwriting its first columns.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "hpcrl/model/decoder_model.h"

namespace hpcrl::rollout {

// One slot's cached tokens taken out of the slots: per layer, this rank's
// keys and values [Hkv_local, length, D] (a paused row's, kept across calls:
// GenerationCall::keep_paused_cache).
struct SlotCache {
  int64_t length = 0;
  std::vector<at::Tensor> k, v;
};

class KvSlots {
 public:
  // Zero-filled buffers for `slots` sequences of up to `capacity` tokens, in the
  // model's dtype and on its device. Zero (not uninitialised) memory keeps the
  // masked columns finite: attention multiplies them by an exact 0.
  KvSlots(const model::DecoderModel& model, int64_t slots, int64_t capacity);

  int64_t slots() const { return slots_; }
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return static_cast<int64_t>(k_.size()); }
  at::Tensor& k(int64_t layer) { return k_[layer]; }  // [S, Hkv_local, capacity, D]
  at::Tensor& v(int64_t layer) { return v_[layer]; }

  // Tokens cached in slot r (its next token's position).
  int64_t length(int64_t r) const { return length_[r]; }
  void set_length(int64_t r, int64_t n);
  // Every slot empty (length 0): a new call on buffers kept from the last one.
  void clear();
  // Lengths of slots [0, rows) as an int64 tensor on the cache's device.
  at::Tensor lengths(int64_t rows) const;

  // Copies slot `from`'s cached tokens into slot `to` (which takes its length):
  // how the engine keeps its live rows contiguous when a sequence finishes.
  void move(int64_t from, int64_t to);
  // Slot from[i]'s cached tokens into slot to[i] for every i at once, as if
  // each source were read before any slot is written (a chain of moves made
  // one): one gather and one scatter per buffer, however many slots move —
  // the host's dispatch work does not grow with the rows. `to` must not repeat.
  void move(const std::vector<int64_t>& from, const std::vector<int64_t>& to);
  // Exchanges the cached tokens (and lengths) of slots a and b: how a
  // multi-turn row waiting for a reply leaves the live rows (generation_turns.cpp).
  void swap(int64_t a, int64_t b);
  // Slot r's cached tokens, copied out; and a copy put back into slot r (which
  // takes its length). InternalError when the copy is of another shape.
  SlotCache copy_out(int64_t r) const;
  void copy_in(int64_t r, const SlotCache& cache);

  int64_t bytes() const;  // memory held by all buffers

 private:
  int64_t slots_, capacity_;
  std::vector<at::Tensor> k_, v_;
  std::vector<int64_t> length_;
};

}  // namespace hpcrl::rollout
