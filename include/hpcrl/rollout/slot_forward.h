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
#include "hpcrl/rollout/slot_projections.h"

namespace hpcrl::rollout {

class SlotForward {
 public:
  // Rows (prompt tokens) one prefill forward computes at most: bounds its
  // activations and GEMM buffers whatever the prompts' lengths.
  static constexpr int64_t kPrefillTokens = 2048;

  // attention_elements: the attention scores one prefill forward may hold
  // (prefill_chunk). `projections` (the engine's, over the same model) must be
  // prepared for every call before it runs (SlotProjections::prepare): a
  // forward may serve several calls (decode_workspace.h).
  SlotForward(model::DecoderModel& model, int64_t attention_elements, SlotProjections& projections);

  // Positions per prefill forward (a chunk) for `prompts` distinct prompts of
  // up to `longest` tokens: the largest whose attention scores, [prompts,
  // heads, chunk, ≤ longest], stay within attention_elements and whose rows,
  // prompts · chunk, within kPrefillTokens; 0 when not even one position fits
  // (admit fewer prompts).
  int64_t prefill_chunk(int64_t prompts, int64_t longest) const;

  // Prefills prompts[prompt_of[f]] into slot first + f for f in [0, F), where
  // the first U = prompts.size() sequences are one of each prompt in order
  // (prompt_of[u] = u): the distinct prompts run once, right-padded to a common
  // length, in chunks of `chunk` positions that attend to the keys/values the
  // earlier chunks left in those U slots; then the other samples copy their
  // prompt's slot. Returns [F, V] logits (float32, or float64 for a float64
  // model) of each sequence's first generated token (full vocabulary on every
  // tp rank). Runs ceil(longest / chunk) forwards.
  at::Tensor prefill(KvSlots& slots, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                     const std::vector<int64_t>& prompt_of, int64_t chunk);

  // prefill() in one chunk as a function of device tensors alone: prompt u is
  // ids[u, 0 : lengths[u]) of the right-padded ids [U, L] (int64, lengths
  // [U] >= 1); sequence f takes prompt sample_prompt[f]'s keys/values into
  // columns [0, L) of slot sample_slot[f] (both [F] int64) and gets the
  // logits of its first token. A slot named twice must take the same prompt
  // (a padded entry repeats a real one). The host's slot lengths are neither
  // read nor changed (the caller sets them). Returns [F, V] logits. No host
  // read: a CUDA graph can hold it (fixed_prefill.h).
  at::Tensor prefill_fixed(KvSlots& slots, const at::Tensor& ids, const at::Tensor& lengths,
                           const at::Tensor& sample_prompt, const at::Tensor& sample_slot);

  // Appends tokens[j] (at least one) to slot first + j after its length cached
  // tokens, for every j in one forward (right-padded to the longest list), each
  // row attending to its own columns so far, its keys/values written by one
  // scatter per buffer: multi-turn replies join their rows' caches. Returns
  // [J, V] logits of the token after each list's last one.
  at::Tensor extend(KvSlots& slots, int64_t first, const std::vector<std::vector<int32_t>>& tokens);

  // One step for slots [0, rows): tokens[r] ([rows] int64 on the model's device)
  // is appended at position length(r), which `positions` holds on the device
  // too (the host's lengths give the step's key range). Returns [rows, V]
  // logits of the next token (dtype as for prefill), valid until the next step.
  at::Tensor decode(KvSlots& slots, int64_t rows, const at::Tensor& tokens, const at::Tensor& positions);

  // decode() as a function of device tensors alone, for slots [0, B) and
  // their cache columns [0, keys): row r feeds tokens[r] at positions[r]
  // (attending to columns <= it) and writes its key/value at column
  // columns[r] (a padded row's is a scratch column no row attends to). The
  // host's slot lengths are neither read nor changed (the caller keeps
  // them). Returns [B, V] logits. No host read: a CUDA graph can hold it.
  at::Tensor decode_fixed(KvSlots& slots, int64_t B, int64_t keys, const at::Tensor& tokens,
                          const at::Tensor& positions, const at::Tensor& columns);

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
  // One token for each of slots [0, B) through run_layers (decode and
  // decode_fixed): fed at `positions`, its key/value written at `columns`,
  // attending to columns [0, keys) up to its position -> [B, C] hidden.
  at::Tensor decode_layers(KvSlots& slots, int64_t B, int64_t keys, const at::Tensor& tokens,
                           const at::Tensor& positions, const at::Tensor& columns);
  // The decode step's layers on the CPU float32 path (slot_forward_cpu.cpp):
  // run_layers at T = 1 with the small per-row operations — RMSNorm, RoPE,
  // the key/value column writes, attention — one CPU-kernel pass each.
  // x: [R, C] embeddings of rows [0, R) -> [R, C] after the final norm, valid
  // until the next step.
  at::Tensor decode_layers_cpu(at::Tensor x, KvSlots& slots, const model::RopeTables& rope);

  model::DecoderModel& model_;
  model::RotaryEmbedding rope_;
  int64_t heads_, kv_heads_;
  const int64_t attention_elements_;
  at::Device device_;
  SlotProjections& proj_;
  // decode_layers_cpu applies: float32 on the CPU, no MoE layer (whose block keeps its own path).
  bool cpu_decode_ = false;
  StepBuffer normed_out_, attention_out_;
};

}  // namespace hpcrl::rollout
