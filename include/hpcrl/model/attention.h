// Grouped-query self-attention of one decoder layer, split over tensor and
// sequence parallelism:
//   tp: q/k/v are column-parallel (each rank computes H/tp query heads and its
//       KV heads: Hkv/tp of them, or one replicated head when tp > Hkv), o_proj is
//       row-parallel (partial outputs summed over tp).
//   sp: the input holds T/sp tokens; an all-to-all before attention gives each
//       rank all T tokens for (H/tp)/sp heads, another one after it gives back
//       T/sp tokens for all H/tp heads (Ulysses).
// Options per family: QKV bias (qwen2), per-head RMSNorm of q and k (qwen3).
// Submodules carry HF names (q_proj, k_proj, v_proj, o_proj, q_norm, k_norm).
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/kv_cache.h"
#include "hpcrl/model/rms_norm.h"
#include "hpcrl/model/rope.h"
#include "hpcrl/parallel/parallel_context.h"
#include "hpcrl/parallel/tensor/linear.h"

namespace hpcrl::model {

// Heads this rank holds (InputError when the layout does not divide the model).
struct AttentionLayout {
  int64_t heads = 0;     // query heads per tp rank
  int64_t kv_heads = 0;  // key/value heads per tp rank (1 when replicated)
  int64_t kv_chunks = 0; // how many distinct KV chunks exist over tp (≤ tp)
};
AttentionLayout attention_layout(const ModelArch& arch, int tp, int sp);

class Attention : public torch::nn::Module {
 public:
  Attention(const ModelArch& arch, const parallel::ParallelContext& ctx);

  // x: [B, Tl, C] (this sp rank's tokens), rope: tables for those tokens,
  // allowed: attention_mask() over the full sequence (+ cache), cache: this
  // layer's cache or null. -> [B, Tl, C], replicated over tp.
  at::Tensor forward(const at::Tensor& x, const RopeTables& rope, const at::Tensor& allowed,
                     LayerKvCache* cache = nullptr);

  std::shared_ptr<parallel::tensor::ColumnParallelLinear> q_proj, k_proj, v_proj;
  std::shared_ptr<parallel::tensor::RowParallelLinear> o_proj;
  std::shared_ptr<RmsNorm> q_norm, k_norm;  // qwen3 only

 private:
  parallel::ParallelContext ctx_;
  AttentionLayout layout_;
  int64_t head_dim_;
};

}  // namespace hpcrl::model
