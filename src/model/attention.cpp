// Grouped-query attention with tp head split and Ulysses sp (attention.h).
#include "hpcrl/model/attention.h"

#include <torch/utils.h>

#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;
namespace sequence = parallel::sequence;

AttentionLayout attention_layout(const ModelArch& arch, int tp, int sp) {
  const int64_t H = arch.num_heads, KV = arch.num_kv_heads;
  HPCRL_CHECK_INPUT(H % tp == 0, "tp=" << tp << " does not divide the " << H << " attention heads; choose a tp that "
                                       << "divides num_attention_heads");
  HPCRL_CHECK_INPUT(KV % tp == 0 || tp % KV == 0,
                    "tp=" << tp << " and the " << KV << " key/value heads: one must divide the other (KV heads are "
                          << "split when kv % tp == 0 and replicated when tp % kv == 0)");
  HPCRL_CHECK_INPUT(H % (int64_t(tp) * sp) == 0, "Ulysses sequence parallelism needs heads % (tp·sp) == 0: "
                                                     << H << " heads, tp=" << tp << ", sp=" << sp);
  AttentionLayout l;
  l.heads = H / tp;
  l.kv_heads = KV % tp == 0 ? KV / tp : 1;
  l.kv_chunks = KV % tp == 0 ? tp : KV;
  return l;
}

Attention::Attention(const ModelArch& arch, const parallel::ParallelContext& ctx)
    : ctx_(ctx), layout_(attention_layout(arch, ctx.tp_size(), ctx.sp_size())), head_dim_(arch.head_dim) {
  const int64_t C = arch.hidden_size, D = arch.head_dim;
  const bool bias = arch.attention_bias;
  q_proj = register_module("q_proj", std::make_shared<tensor::ColumnParallelLinear>(C, arch.num_heads * D, bias, ctx.tp));
  k_proj = register_module("k_proj", std::make_shared<tensor::ColumnParallelLinear>(C, arch.num_kv_heads * D, bias,
                                                                                    ctx.tp, layout_.kv_chunks));
  v_proj = register_module("v_proj", std::make_shared<tensor::ColumnParallelLinear>(C, arch.num_kv_heads * D, bias,
                                                                                    ctx.tp, layout_.kv_chunks));
  o_proj = register_module("o_proj", std::make_shared<tensor::RowParallelLinear>(arch.num_heads * D, C, false, ctx.tp));
  if (arch.qk_norm) {
    // Per-head norms see only this rank's heads: their gradients are summed over tp.
    q_norm = register_module("q_norm", std::make_shared<RmsNorm>(D, arch.rms_norm_eps, ctx.tp));
    k_norm = register_module("k_norm", std::make_shared<RmsNorm>(D, arch.rms_norm_eps, ctx.tp));
  }
}

at::Tensor Attention::forward(const at::Tensor& x, const RopeTables& rope, const at::Tensor& allowed,
                              LayerKvCache* cache) {
  const int64_t B = x.size(0), Tl = x.size(1), D = head_dim_;
  const int64_t H = layout_.heads, KV = layout_.kv_heads;
  at::Tensor xc = tensor::copy_to_tp(x, ctx_.tp);  // one backward all-reduce for q, k and v
  at::Tensor q = q_proj->forward_copied(xc).view({B, Tl, H, D});
  at::Tensor k = k_proj->forward_copied(xc).view({B, Tl, KV, D});
  at::Tensor v = v_proj->forward_copied(xc).view({B, Tl, KV, D});
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = apply_rotary(q, rope);
  k = apply_rotary(k, rope);

  const int sp = ctx_.sp_size();
  if (sp > 1) {
    HPCRL_CHECK(cache == nullptr, "a KV cache is not supported with sequence parallelism (sp=" << sp << ")");
    if (KV % sp != 0) {  // too few KV heads to split over sp: give every query head its own copy
      k = k.repeat_interleave(H / KV, 2);
      v = v.repeat_interleave(H / KV, 2);
    }
    q = sequence::seq_to_heads(q, ctx_.sp);  // [B, T, H/sp, D]
    k = sequence::seq_to_heads(k, ctx_.sp);
    v = sequence::seq_to_heads(v, ctx_.sp);
  }
  q = q.transpose(1, 2);  // [B, h, T, D]
  k = k.transpose(1, 2);  // [B, hkv, T, D]
  v = v.transpose(1, 2);
  if (cache) {
    if (cache->k.defined()) {
      k = at::cat({cache->k, k}, 2);
      v = at::cat({cache->v, v}, 2);
    }
    cache->k = k.detach();
    cache->v = v.detach();
  }
  at::Tensor o = attend(q, k, v, allowed).transpose(1, 2);  // [B, T, h, D]
  if (sp > 1) o = sequence::heads_to_seq(o, ctx_.sp);      // [B, Tl, H, D]
  return o_proj->forward(o.reshape({B, Tl, H * D}));
}

}  // namespace hpcrl::model
