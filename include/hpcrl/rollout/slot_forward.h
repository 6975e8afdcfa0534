// The decoder's inference forward against the preallocated slot cache
// (kv_slots.h): prefill new prompts into free slots, then decode one token for
// every live slot per call, writing each new key/value column in place.
//
// It runs on the model's own modules and weights — embedding, norms, tp-split
// q/k/v/o and MLP projections, RoPE, the attention kernel, MoE block, LM head —
// composed exactly as DecoderModel::forward composes them; what differs is the
// cache handling, and that a one-token product on the CPU is a GEMV (twice the
// memory bandwidth of LibTorch's one-row GEMM). Tests pin it to DecoderModel::forward (tokens of greedy decoding
// and log-probs of the training forward, tests/rollout/). Sequence parallelism
// is not used here: every sp rank holds the whole (tp-split) model and
// decodes its own sequences, as data-parallel ranks do.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/rope.h"
#include "hpcrl/rollout/kv_slots.h"

namespace hpcrl::rollout {

class SlotForward {
 public:
  explicit SlotForward(model::DecoderModel& model);

  // Prefills prompts[prompt_of[f]] into slot first + f for f in [0, F): the
  // distinct prompts run once (right-padded to a common length), and the n
  // samples of a prompt copy its keys/values. Returns [F, V] logits (float32, or
  // float64 for a float64 model) of each sequence's first generated token (full
  // vocabulary on every tp rank).
  at::Tensor prefill(KvSlots& slots, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                     const std::vector<int64_t>& prompt_of);

  // One step for slots [0, rows): tokens[r] is appended at position length(r).
  // Returns [rows, V] logits of the next token (dtype as for prefill).
  at::Tensor decode(KvSlots& slots, int64_t rows, const std::vector<int64_t>& tokens);

  // A one-token forward that touches no cache and whose result is dropped:
  // ranks of an expert-parallel group call it when they have nothing to run,
  // because every MoE layer is a collective over the ep group.
  void idle_step();

  int64_t vocab_size() const { return model_.arch().vocab_size; }

 private:
  // Keys and values a layer attends over, given this step's [N, Hkv, T, D] ones.
  using KvStore = std::function<std::pair<at::Tensor, at::Tensor>(int64_t layer, at::Tensor k, at::Tensor v)>;
  // x: [N, T, C] embeddings -> [N, T, C] after the final norm.
  at::Tensor run_layers(at::Tensor x, const at::Tensor& positions, const at::Tensor& allowed,
                        const at::Tensor& token_mask, const KvStore& store);
  // hidden: [N, C] -> [N, V] (at least float32), gathered over tp.
  at::Tensor full_logits(const at::Tensor& hidden);

  model::DecoderModel& model_;
  model::RotaryEmbedding rope_;
  int64_t heads_, kv_heads_;
  at::Device device_;
};

}  // namespace hpcrl::rollout
