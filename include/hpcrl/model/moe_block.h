// The mixture-of-experts feed-forward block of a decoder layer (qwen2_moe,
// mixtral): top-k router, dropless SwiGLU experts, optional sigmoid-gated
// shared expert (qwen2_moe), and the load-balancing loss. Experts are sharded
// over the ep group (parallel/expert/token_dispatcher.h); the router and the
// shared expert are replicated. Each ep rank routes its own tokens; the result
// on every rank equals a single-rank block holding all experts run on that
// rank's tokens. With tp > 1 the block is replicated over tp (every tp rank
// computes it on the same tokens; no tp communication).
//
// The decoder layer registers the block under hf_module_name(arch) ("mlp" or
// "block_sparse_moe"), so torch parameter names below the layer are HF names.
// docs/moe.md describes routing, the loss and the dispatch protocol.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/moe_expert.h"
#include "hpcrl/parallel/expert/token_dispatcher.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::model {

struct MoeOutput {
  at::Tensor y;              // same shape as x
  at::Tensor aux_loss;       // scalar, float32 (float64 for a float64 block), UNSCALED (see
                             // load_balancing_loss): the caller adds router_aux_loss_coef ×
                             // (mean over MoE layers) to its loss
  at::Tensor expert_counts;  // [E] int64: (token, expert) pairs this rank routed to each expert
};

// One parameter as the checkpoint names it.
struct MoeParameter {
  std::string name;     // below the decoder layer, e.g. "mlp.experts.5.up_proj.weight"
  at::Tensor tensor;    // this rank's parameter: a whole HF tensor (experts are never sliced)
  int64_t expert = -1;  // global expert index; -1: router or shared expert (replicated over ep)
};

class MoeBlock : public torch::nn::Module {
 public:
  // InputError when the arch has no experts, k is out of range, or num_experts % ep != 0.
  // Initialisation (N(0, 0.02²)) draws one seed from the global torch generator
  // (exactly one draw, whatever the layout) and derives every tensor from it by
  // global expert index, so all layouts (any ep) build the same weights from the
  // same seed and leave the global generator in the same state.
  MoeBlock(const ModelArch& arch, const parallel::ParallelContext& ctx);

  // x: [..., C] (tokens of this rank); token_mask: [...] optional, 0 for padding
  // (kept out of the aux loss; padding tokens are still routed). Collective over ep.
  MoeOutput forward(const at::Tensor& x, const at::Tensor& token_mask = {});

  // "mlp" (qwen2_moe and others) or "block_sparse_moe" (mixtral).
  static std::string hf_module_name(const ModelArch& arch);
  // The block's one draw from the global generator. A pipeline stage makes it
  // for each MoE layer it does not build, so the layers it builds get the seeds
  // they get in the whole model.
  static uint64_t draw_init_seed();
  // Every parameter this rank holds, with its HF name (prefixed by hf_module_name)
  // and which expert it belongs to: what the weight loader reads and writes.
  std::vector<MoeParameter> hf_parameters() const;

  const parallel::expert::TokenDispatcher& dispatcher() const { return dispatcher_; }
  // The local experts, in global order: experts()[i] is global expert first_local_expert() + i.
  const std::vector<std::shared_ptr<ExpertMlp>>& experts() const { return experts_; }
  int64_t first_local_expert() const { return dispatcher_.first_local_expert(); }

  std::shared_ptr<Projection> gate;                // router, weight [E, C]
  std::shared_ptr<ExpertMlp> shared_expert;        // null without a shared expert
  std::shared_ptr<Projection> shared_expert_gate;  // weight [1, C]; null without a shared expert

 private:
  void reset_parameters();

  int64_t hidden_, num_experts_, top_k_;
  bool norm_topk_prob_;
  std::string hf_name_;
  parallel::expert::TokenDispatcher dispatcher_;
  std::vector<std::shared_ptr<ExpertMlp>> experts_;
};

}  // namespace hpcrl::model
