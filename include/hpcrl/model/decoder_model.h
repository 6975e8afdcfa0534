// The decoder-only transformer every role runs (policy, reference, critic,
// reward model, teacher, student), assembled from the parallel layers so the
// same code runs on one rank or split over tp × sp (× ep for MoE).
//
// The module tree mirrors HF's, so named_parameters() are HF tensor names:
//   model.embed_tokens.weight                 vocab-parallel embedding
//   model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.*}
//   model.norm.weight
//   lm_head.weight                            untied LM head (vocab-parallel)
//   score.weight                              value head (critics, reward models)
// Every rank holds only its slice of each split tensor (shard_specs()).
//
// Inputs are this sp rank's chunk of the sequence: ids [B, T/sp]. Outputs are
// for the same tokens. Log-probs come from vocab-parallel logits that are never
// gathered (parallel/tensor/vocab_logprobs.h).
//
// With pipeline parallelism (ctx.pp of more than one rank) a rank builds only
// its model chunks (pipeline_layout.h): the layers of other ranks are empty
// placeholders, so the held ones keep their HF names (model.layers.N with the
// global N) and loading, saving and sharding work unchanged. Such a model runs
// through model/pipeline_stage.h, not forward().
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <map>
#include <memory>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/decoder_layer.h"
#include "hpcrl/model/heads.h"
#include "hpcrl/model/kv_cache.h"
#include "hpcrl/model/parameter_units.h"
#include "hpcrl/model/pipeline_layout.h"
#include "hpcrl/model/rms_norm.h"
#include "hpcrl/model/rope.h"
#include "hpcrl/parallel/parallel_context.h"
#include "hpcrl/parallel/tensor/linear.h"
#include "hpcrl/parallel/tensor/shard_spec.h"
#include "hpcrl/parallel/tensor/vocab_embedding.h"
#include "hpcrl/parallel/tensor/vocab_logprobs.h"

namespace hpcrl::model {

struct ModelOptions {
  bool lm_head = true;                    // per-token log-probs (policy, reference, teacher, student)
  bool value_head = false;                // "score" head (critic, reward model)
  bool activation_checkpointing = false;  // recompute each layer in the backward (training only)
  uint64_t seed = 0;                      // initial weights, identical for every layout
  bool init = true;                       // false: dense weights stay zero (a checkpoint is loaded next)
  // Pipeline parallelism (only when ctx.pp has more than one rank): layers per
  // model chunk in model order (empty: balanced by parameter count) and chunks
  // per rank (> 1: interleaved 1F1B). See pipeline_layout.h.
  std::vector<int64_t> pp_layers;
  int pp_virtual_stages = 1;
};

struct ForwardOutput {
  at::Tensor hidden;    // [B, Tl, C] after the final norm
  at::Tensor aux_loss;  // scalar: router_aux_loss_coef × mean MoE load-balancing loss; 0 for dense models
};

// What every layer of one forward pass shares.
struct LayerInputs {
  RopeTables rope;        // for the positions of this rank's tokens
  at::Tensor allowed;     // which keys each query may attend to (attention_kernel.h)
  at::Tensor token_mask;  // [B, Tl] bool, false = padding; undefined = all valid
};

// The inner "model." part: embeddings, layers, final norm. A pipeline stage
// builds only what `held` says; the other layers are empty placeholders and
// embed_tokens / norm stay null where the stage has no use for them.
struct HeldParts {
  std::vector<bool> layers;  // by global layer index
  bool embedding = true, norm = true;
};

class DecoderBody : public torch::nn::Module {
 public:
  DecoderBody(const ModelArch& arch, const parallel::ParallelContext& ctx, const HeldParts& held);

  std::shared_ptr<parallel::tensor::VocabParallelEmbedding> embed_tokens;
  torch::nn::ModuleList layers;
  std::shared_ptr<RmsNorm> norm;
};

class DecoderModel : public torch::nn::Module {
 public:
  // Builds the model for this rank's place in `ctx` and initialises it from
  // options.seed (N(0, 0.02²) matrices, unit norms, zero biases): every layout
  // gets the same full weights. InputError when the layout does not divide the model.
  DecoderModel(const ModelArch& arch, const parallel::ParallelContext& ctx, ModelOptions options = {});

  // ids: [B, Tl] int64, this sp rank's tokens.
  // positions: [B, Tl] int64; default: consecutive positions after the cached
  //   tokens and the tokens of lower sp ranks. Give them explicitly for left padding.
  // attention_mask: [B, Tl] (or [B, cached + Tl] with a cache) bool/int, 0 = padding; default all valid.
  //   Integer masks may number the sequences of a packed row 1, 2, ...: tokens attend only within
  //   their own sequence (give each sequence's positions from 0 then).
  // cache: prefill/decode with a KV cache (sp must be 1); null for training.
  // Needs the whole model (pp = 1); a pipeline stage runs through model/pipeline_stage.h.
  ForwardOutput forward(const at::Tensor& ids, const at::Tensor& positions = {}, const at::Tensor& attention_mask = {},
                        KvCache* cache = nullptr);

  // The two halves of forward() that a pipeline stage reuses. layer_inputs:
  // RoPE tables and masks for ids [B, Tl] (arguments as for forward()) in the
  // hidden states' dtype. run_layers: layers [first, end) on h [B, Tl, C] (all
  // held by this rank); aux_loss is those layers' share of the model's MoE
  // aux loss, so the shares of all chunks add up to forward()'s.
  LayerInputs layer_inputs(const at::Tensor& ids, const at::Tensor& positions, const at::Tensor& attention_mask,
                           KvCache* cache, at::ScalarType dtype);
  ForwardOutput run_layers(at::Tensor h, int64_t first, int64_t end, const LayerInputs& in, KvCache* cache = nullptr);

  // log p(targets) and entropy per token from the hidden states, of the distribution at
  // `temperature` (local_logits'). targets: [B, Tl] int64 (the next token of each position,
  // shifted by the caller before sharding).
  parallel::tensor::TokenLogProbs token_logprobs(const at::Tensor& hidden, const at::Tensor& targets,
                                                 bool with_entropy = true, double temperature = 1.0);
  // This tp rank's logits: [B, Tl, V/tp] for vocabulary ids [vocab_start(), vocab_start() + V/tp).
  // At a temperature other than 1 they are fp32 logits divided by it, as the rollout engine's
  // sampler divides its fp32 logits: the one place where training and scoring apply it.
  at::Tensor local_logits(const at::Tensor& hidden, double temperature = 1.0);
  int64_t vocab_start() const { return ctx_.tp_rank() * (arch_.vocab_size / ctx_.tp_size()); }
  // Value per token, [B, Tl] float32 (needs options.value_head).
  at::Tensor values(const at::Tensor& hidden);

  KvCache new_kv_cache() const;

  // HF name → how this rank's parameter is cut from the full tensor, for every parameter.
  std::map<std::string, parallel::tensor::ShardSpec> shard_specs();

  const ModelArch& arch() const { return arch_; }
  const parallel::ParallelContext& parallel_context() const { return ctx_; }
  const ModelOptions& options() const { return options_; }

  // Pipeline parallelism: the layout every pp rank agrees on and this rank's chunks.
  const PipelineLayout& pipeline_layout() const { return layout_; }
  const std::vector<int>& local_chunks() const { return local_chunks_; }
  bool is_whole() const { return layout_.pp == 1; }
  bool holds_layer(int64_t layer) const { return held_.layers.at(layer); }
  bool holds_first_chunk() const { return local_chunks_.front() == 0; }
  bool holds_last_chunk() const { return layout_.is_last_chunk(local_chunks_.back()); }
  // Whether this rank holds the HF tensor `name` of the model's layout.
  bool holds_tensor(const std::string& name) const;
  // Whether `name` is a tensor of this model that another pp stage holds
  // (false on a whole model, and for names the model has no place for).
  bool on_other_stage(const std::string& name) const;

  // ZeRO-3: who gathers the sharded parameters around each unit's forward
  // (parameter_units.h); null while the parameters are whole.
  void set_parameter_units(std::shared_ptr<ParameterUnits> units) { units_ = std::move(units); }
  ParameterUnits* parameter_units() const { return units_.get(); }

  std::shared_ptr<DecoderBody> model;
  std::shared_ptr<parallel::tensor::ColumnParallelLinear> lm_head;  // null when tied or without an LM head
  std::shared_ptr<ValueHead> score;                                 // null without a value head

 private:
  ModelArch arch_;
  parallel::ParallelContext ctx_;
  ModelOptions options_;
  PipelineLayout layout_;
  std::vector<int> local_chunks_;
  HeldParts held_;
  RotaryEmbedding rope_;
  std::shared_ptr<ParameterUnits> units_;
};

}  // namespace hpcrl::model
