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
};

struct ForwardOutput {
  at::Tensor hidden;    // [B, Tl, C] after the final norm
  at::Tensor aux_loss;  // scalar: router_aux_loss_coef × mean MoE load-balancing loss; 0 for dense models
};

// The inner "model." part: embeddings, layers, final norm.
class DecoderBody : public torch::nn::Module {
 public:
  DecoderBody(const ModelArch& arch, const parallel::ParallelContext& ctx);

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
  // cache: prefill/decode with a KV cache (sp must be 1); null for training.
  ForwardOutput forward(const at::Tensor& ids, const at::Tensor& positions = {}, const at::Tensor& attention_mask = {},
                        KvCache* cache = nullptr);

  // log p(targets) and entropy per token from the hidden states. targets: [B, Tl] int64
  // (the next token of each position, shifted by the caller before sharding).
  parallel::tensor::TokenLogProbs token_logprobs(const at::Tensor& hidden, const at::Tensor& targets,
                                                 bool with_entropy = true);
  // This tp rank's logits: [B, Tl, V/tp] for vocabulary ids [vocab_start(), vocab_start() + V/tp).
  at::Tensor local_logits(const at::Tensor& hidden);
  int64_t vocab_start() const { return model->embed_tokens->vocab_start(); }
  // Value per token, [B, Tl] float32 (needs options.value_head).
  at::Tensor values(const at::Tensor& hidden);

  KvCache new_kv_cache() const;

  // HF name → how this rank's parameter is cut from the full tensor, for every parameter.
  std::map<std::string, parallel::tensor::ShardSpec> shard_specs();

  const ModelArch& arch() const { return arch_; }
  const parallel::ParallelContext& parallel_context() const { return ctx_; }
  const ModelOptions& options() const { return options_; }

  std::shared_ptr<DecoderBody> model;
  std::shared_ptr<parallel::tensor::ColumnParallelLinear> lm_head;  // null when tied or without an LM head
  std::shared_ptr<ValueHead> score;                                 // null without a value head

 private:
  ModelArch arch_;
  parallel::ParallelContext ctx_;
  ModelOptions options_;
  RotaryEmbedding rope_;
};

}  // namespace hpcrl::model
