// Decoder layer (decoder_layer.h).
#include "hpcrl/model/decoder_layer.h"

#include <torch/utils.h>

namespace hpcrl::model {

DecoderLayer::DecoderLayer(const ModelArch& arch, const parallel::ParallelContext& ctx) {
  input_layernorm = register_module("input_layernorm", std::make_shared<RmsNorm>(arch.hidden_size, arch.rms_norm_eps));
  self_attn = register_module("self_attn", std::make_shared<Attention>(arch, ctx));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RmsNorm>(arch.hidden_size, arch.rms_norm_eps));
  if (arch.num_experts > 0) {
    moe = register_module(MoeBlock::hf_module_name(arch), std::make_shared<MoeBlock>(arch, ctx));
  } else {
    mlp = register_module("mlp", std::make_shared<Mlp>(arch.hidden_size, arch.intermediate_size, ctx.tp));
  }
}

LayerOutput DecoderLayer::forward(const at::Tensor& x, const RopeTables& rope, const at::Tensor& allowed,
                                  const at::Tensor& token_mask, LayerKvCache* cache) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), rope, allowed, cache);
  at::Tensor n = post_attention_layernorm->forward(h);
  if (mlp) return {h + mlp->forward(n), at::Tensor()};
  MoeOutput m = moe->forward(n, token_mask);
  return {h + m.y, m.aux_loss};
}

}  // namespace hpcrl::model
