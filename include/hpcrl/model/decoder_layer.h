// One pre-norm decoder layer: h = x + attn(norm(x)); y = h + ffn(norm(h)), where
// the feed-forward block is the dense SwiGLU MLP or, when the architecture has
// experts, the MoE block (model/moe_block.h), registered under the family's HF
// name ("mlp" or "block_sparse_moe").
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/attention.h"
#include "hpcrl/model/mlp.h"
#include "hpcrl/model/moe_block.h"
#include "hpcrl/model/rms_norm.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::model {

struct LayerOutput {
  at::Tensor hidden;    // [B, Tl, C]
  at::Tensor aux_loss;  // scalar: the MoE load-balancing loss (unscaled); undefined for a dense layer
};

class DecoderLayer : public torch::nn::Module {
 public:
  DecoderLayer(const ModelArch& arch, const parallel::ParallelContext& ctx);

  // token_mask: [B, Tl] (this rank's tokens, false = padding) or undefined; only the MoE router uses it.
  LayerOutput forward(const at::Tensor& x, const RopeTables& rope, const at::Tensor& allowed,
                      const at::Tensor& token_mask, LayerKvCache* cache = nullptr);

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<Attention> self_attn;
  std::shared_ptr<Mlp> mlp;         // dense layers
  std::shared_ptr<MoeBlock> moe;    // MoE layers
};

}  // namespace hpcrl::model
