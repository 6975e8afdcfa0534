// The linear layers of the slot forward (slot_forward.h): per decoder layer the
// q/k/v projection, the attention output projection and the dense MLP, and the
// LM head, with tensor parallelism's reductions and biases where the model's
// modules put them.
//
// Two ways to compute them. A float32 model on the CPU decoding more than one
// row gets the engine's packed weights (packed_linear.h): q/k/v fused into
// one matrix, gate/up into another, every product one GEMM over all rows that
// reads each weight once, written into buffers reused from step to step. Any
// other dtype or device runs the model's own weights through LibTorch, with a
// GEMV for a single CPU row.
//
// Engines hold the SlotProjections of their model (shared_for: one per model,
// whichever engines generate with it, e.g. a stage's and an evaluation's) and
// call prepare() at the start of every generation call, so the packed copy and
// the step buffers keep their memory from call to call: an RL run generates
// with new weights every iteration, and fresh memory for a 0.5B model's packed
// copy cost more than the packing on this project's machines (docs/rollout.md).
//
// A model sharded by ZeRO-3 whose weights pack is never gathered whole for a
// call: prepare() gathers one layer at a time (the next one prefetched), packs
// it and copies its norms, and releases it; the call holds the outer unit
// (embedding, final norm, head) and the packed copy, which it needs anyway.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/rollout/packed_linear.h"

namespace hpcrl::rollout {

class SlotProjections {
 public:
  // Holds no packed weights until prepare() asks for them.
  explicit SlotProjections(model::DecoderModel& model);

  // The projections every engine on `model` shares while any of them lives
  // (engines keep their model alive, and a rank runs one generation call at a
  // time, so sharing the buffers is safe).
  static std::shared_ptr<SlotProjections> shared_for(model::DecoderModel& model);

  // True when prepare() packs `model` layer by layer from its ZeRO-3 shards
  // (float32 on the CPU, dense): the caller then holds only the outer unit
  // for the call instead of every parameter (model/parameter_units.h).
  static bool gathers_by_layer(const model::DecoderModel& model);

  // Precondition of every generation call, after the last change to the
  // model's weights: the packed copy is what the projections compute with,
  // and nothing else tells it that an optimizer step, a weight sync or a
  // checkpoint load moved the weights, so each call packs them afresh.
  // pack: use packed weights where they apply (a float32 model on the CPU).
  // They pay from two rows on; a call that decodes one row at a time uses the
  // model's weights in place (a GEMV reads them as fast) and skips the
  // packing pass, keeping the packed memory for a later call — unless the
  // model gathers by layer, whose weights are packed for every call.
  void prepare(bool pack);

  // True when this call computes with the packed CPU weights.
  bool packed() const { return packed_; }
  // True when this call computes with LoRA-merged weights (made anew by every prepare()).
  bool merges_adapters() const { return !merged_.empty(); }

  // xc: [..., C] -> q [..., heads·D], k and v [..., kv_heads·D] (this tp rank's heads).
  std::array<at::Tensor, 3> qkv(int64_t layer, const at::Tensor& xc);
  // Attention output [..., heads·D] -> [..., C], summed over tp.
  at::Tensor attention_output(int64_t layer, const at::Tensor& o);
  // down(silu(gate(xc)) · up(xc)), summed over tp; the layer must have a dense MLP.
  at::Tensor mlp(int64_t layer, const at::Tensor& xc);
  // Final hidden states [N, C] -> this tp rank's logits [N, V/tp].
  at::Tensor local_logits(const at::Tensor& hidden);
  // The weight of one of the layer's RMSNorms: packed, the copy prepare()
  // made (a sharded layer's own is released); else the model's. q and k:
  // Qwen3's per-head norms, undefined for a model without them.
  enum class Norm { input, post_attention, q, k };
  const at::Tensor& norm_weight(int64_t layer, Norm which) const;

 private:
  struct PackedLayer {
    PackedLinear qkv, o, gate_up, down;  // gate_up/down undefined for an MoE layer
    // Copies of the norms' weights (a sharded layer's own go with its gather).
    at::Tensor input_norm, post_norm, q_norm, k_norm;  // q/k: undefined without
  };

  // What the engine multiplies by for `linear`: its weight, or for a layer with
  // an active LoRA adapter the merged W + (alpha/r)·B·A of merged_.
  const at::Tensor& weight_of(const torch::nn::Module& linear, const at::Tensor& weight) const;
  // Merges the active adapters of layer i into merged_ (none without LoRA).
  void merge_adapters(size_t i);
  // Packs layer i's projections and copies its norms into layers_[i].
  void pack_layer(size_t i);

  model::DecoderModel& model_;
  // By linear layer: its merged weight, remade by every prepare() since the
  // adapter moves with every update. One merge per generation call is cheaper
  // than two extra low-rank products per layer and token (docs/lora.md).
  std::unordered_map<const torch::nn::Module*, at::Tensor> merged_;
  bool packed_ = false;
  std::vector<PackedLayer> layers_;  // packed by an earlier prepare(true), or empty
  PackedLinear head_;
  // Per-step outputs, reused (each is consumed before the next layer writes it).
  StepBuffer qkv_out_, o_out_, gate_up_out_, act_out_, down_out_, logits_out_;
  int64_t q_width_ = 0, kv_width_ = 0, intermediate_ = 0;
};

}  // namespace hpcrl::rollout
