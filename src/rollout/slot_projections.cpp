// The slot forward's linear layers (slot_projections.h).
#include "hpcrl/rollout/slot_projections.h"

#include <torch/utils.h>

#include <mutex>
#include <unordered_map>

#include "hpcrl/model/attention.h"
#include "hpcrl/model/decoder_layer.h"
#include "hpcrl/model/parameter_units.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/rollout/row_gemv.h"

namespace hpcrl::rollout {

namespace {
namespace tensor = parallel::tensor;

// x·Wᵀ + b, as at::linear. A single float32 token on the CPU goes through the
// engine's GEMV (row_gemv.h); another dtype's through at::mv. LibTorch's CPU
// linear runs a one-row GEMM at about half the memory bandwidth of a GEMV
// (measured with OpenBLAS: 11.6 vs 24.3 GB/s on 2 threads).
at::Tensor project(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
  if (row_gemv_applies(x, w)) return row_gemv(x, {w}, {b});
  if (x.numel() != x.size(-1) || !x.device().is_cpu()) return at::linear(x, w, b);
  auto shape = x.sizes().vec();
  shape.back() = w.size(0);
  at::Tensor y = at::mv(w, x.reshape({-1}));
  if (b.defined()) y = y + b;
  return y.view(shape);
}

// The outputs of weights that read the same one-row input, side by side: one
// row_gemv call (one pass over the threads) where it applies.
std::vector<at::Tensor> project_together(const at::Tensor& x, const std::vector<at::Tensor>& w,
                                         const std::vector<at::Tensor>& b) {
  bool together = true;
  for (const auto& wi : w) together = together && row_gemv_applies(x, wi);
  std::vector<at::Tensor> out;
  if (!together) {
    for (size_t i = 0; i < w.size(); ++i) out.push_back(project(x, w[i], b[i]));
    return out;
  }
  const at::Tensor all = row_gemv(x, w, b);
  int64_t offset = 0;
  for (const auto& wi : w) {
    out.push_back(all.narrow(-1, offset, wi.size(0)));
    offset += wi.size(0);
  }
  return out;
}

const at::Tensor& head_weight(const model::DecoderModel& m) {
  // DecoderModel::local_logits: the LM head, or the (vocab-parallel) embedding when tied.
  return m.lm_head ? m.lm_head->weight : m.model->embed_tokens->weight;
}

// Packs into `linear`'s memory when it holds a packed matrix already.
void repack(PackedLinear& linear, const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases) {
  if (linear.defined())
    linear.pack(weights, biases);
  else
    linear = PackedLinear(weights, biases);
}

// Packing pays on the CPU in float32, the dtype the kernels are written for.
bool packs(const model::DecoderModel& m) {
  const at::Tensor& w = m.model->embed_tokens->weight;
  return w.device().is_cpu() && w.scalar_type() == at::kFloat;
}
}  // namespace

SlotProjections::SlotProjections(model::DecoderModel& model) : model_(model) {}

std::shared_ptr<SlotProjections> SlotProjections::shared_for(model::DecoderModel& model) {
  // Expired entries stay until their model's address is reused, then are replaced.
  static std::mutex mutex;
  static std::unordered_map<const model::DecoderModel*, std::weak_ptr<SlotProjections>> by_model;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<SlotProjections> p = by_model[&model].lock();
  if (!p) by_model[&model] = p = std::make_shared<SlotProjections>(model);
  return p;
}

const at::Tensor& SlotProjections::weight_of(const torch::nn::Module& linear, const at::Tensor& weight) const {
  auto it = merged_.find(&linear);
  return it == merged_.end() ? weight : it->second;
}

void SlotProjections::merge_adapters(size_t i) {
  auto merge = [&](const auto& linear) {
    const tensor::LoraAdapter& lora = linear.lora();
    if (!lora.active()) return;
    merged_[&linear] = tensor::merge_lora(linear.weight, lora.b->weight, lora.a->weight, lora.shape.scale());
  };
  auto layer = model_.model->layers->ptr<model::DecoderLayer>(i);
  const auto& a = *layer->self_attn;
  merge(*a.q_proj);
  merge(*a.k_proj);
  merge(*a.v_proj);
  merge(*a.o_proj);
  if (!layer->mlp) return;  // MoE experts carry no adapters
  merge(*layer->mlp->gate_proj);
  merge(*layer->mlp->up_proj);
  merge(*layer->mlp->down_proj);
}

bool SlotProjections::gathers_by_layer(const model::DecoderModel& model) {
  return model.parameter_units() && packs(model) && model.arch().num_experts == 0;
}

void SlotProjections::prepare(bool pack) {
  torch::NoGradGuard no_grad;
  merged_.clear();
  const bool by_layer = gathers_by_layer(model_);
  packed_ = (pack || by_layer) && packs(model_);
  const size_t L = model_.model->layers->size();
  if (!packed_) {
    for (size_t i = 0; i < L; ++i) merge_adapters(i);
    return;
  }
  // ZeRO-3: layer i gathered (i+1 prefetched), packed, released; the caller holds the outer unit.
  model::ParameterUnits* units = by_layer ? model_.parameter_units() : nullptr;
  layers_.resize(L);
  for (size_t i = 0; i < L; ++i) {
    if (units) units->before_forward(int64_t(i));
    merge_adapters(i);
    pack_layer(i);
    merged_.clear();  // packed: the merged weights are in the panels now
    if (units) units->after_forward(int64_t(i), at::Tensor());
  }
  repack(head_, {head_weight(model_)}, {});
}

void SlotProjections::pack_layer(size_t i) {
  auto layer = model_.model->layers->ptr<model::DecoderLayer>(i);
  const auto& a = *layer->self_attn;
  PackedLayer& p = layers_[i];
  repack(p.qkv, {weight_of(*a.q_proj, a.q_proj->weight), weight_of(*a.k_proj, a.k_proj->weight),
                 weight_of(*a.v_proj, a.v_proj->weight)},
         {a.q_proj->bias, a.k_proj->bias, a.v_proj->bias});
  repack(p.o, {weight_of(*a.o_proj, a.o_proj->weight)}, {});
  if (layer->mlp) {
    const model::Mlp& m = *layer->mlp;
    repack(p.gate_up, {weight_of(*m.gate_proj, m.gate_proj->weight), weight_of(*m.up_proj, m.up_proj->weight)}, {});
    repack(p.down, {weight_of(*m.down_proj, m.down_proj->weight)}, {});
    intermediate_ = layer->mlp->gate_proj->weight.size(0);
  }
  q_width_ = a.q_proj->weight.size(0);
  kv_width_ = a.k_proj->weight.size(0);
  auto copy = [](at::Tensor& into, const at::Tensor& w) {
    if (!into.defined() || !into.sizes().equals(w.sizes())) into = at::empty_like(w);
    into.copy_(w);
  };
  copy(p.input_norm, layer->input_layernorm->weight);
  copy(p.post_norm, layer->post_attention_layernorm->weight);
  if (a.q_norm) {
    copy(p.q_norm, a.q_norm->weight);
    copy(p.k_norm, a.k_norm->weight);
  }
}

const at::Tensor& SlotProjections::norm_weight(int64_t layer, Norm which) const {
  static const at::Tensor none;
  if (packed()) {
    const PackedLayer& p = layers_[layer];
    switch (which) {
      case Norm::input: return p.input_norm;
      case Norm::post_attention: return p.post_norm;
      case Norm::q: return p.q_norm;
      case Norm::k: return p.k_norm;
    }
  }
  auto l = model_.model->layers->ptr<model::DecoderLayer>(layer);
  const auto& a = *l->self_attn;
  switch (which) {
    case Norm::input: return l->input_layernorm->weight;
    case Norm::post_attention: return l->post_attention_layernorm->weight;
    case Norm::q: return a.q_norm ? a.q_norm->weight : none;
    case Norm::k: return a.k_norm ? a.k_norm->weight : none;
  }
  return none;
}

std::array<at::Tensor, 3> SlotProjections::qkv(int64_t layer, const at::Tensor& xc) {
  if (!packed()) {
    const auto& a = *model_.model->layers->ptr<model::DecoderLayer>(layer)->self_attn;
    const auto qkv = project_together(xc,
                                      {weight_of(*a.q_proj, a.q_proj->weight), weight_of(*a.k_proj, a.k_proj->weight),
                                       weight_of(*a.v_proj, a.v_proj->weight)},
                                      {a.q_proj->bias, a.k_proj->bias, a.v_proj->bias});
    return {qkv[0], qkv[1], qkv[2]};
  }
  at::Tensor all = layers_[layer].qkv.forward(xc, qkv_out_);
  return {all.narrow(-1, 0, q_width_), all.narrow(-1, q_width_, kv_width_),
          all.narrow(-1, q_width_ + kv_width_, kv_width_)};
}

at::Tensor SlotProjections::attention_output(int64_t layer, const at::Tensor& o) {
  const auto& proj = *model_.model->layers->ptr<model::DecoderLayer>(layer)->self_attn->o_proj;
  const auto& tp = model_.parallel_context().tp;
  at::Tensor y = packed() ? layers_[layer].o.forward(o, o_out_) : project(o, weight_of(proj, proj.weight));
  y = tensor::reduce_from_tp(y, tp);
  return proj.bias.defined() ? y + proj.bias : y;
}

at::Tensor SlotProjections::mlp(int64_t layer, const at::Tensor& xc) {
  const auto& m = *model_.model->layers->ptr<model::DecoderLayer>(layer)->mlp;
  const auto& tp = model_.parallel_context().tp;
  if (!packed()) {  // Mlp::forward: down(silu(gate(x)) · up(x))
    const auto gate_up = project_together(
        xc, {weight_of(*m.gate_proj, m.gate_proj->weight), weight_of(*m.up_proj, m.up_proj->weight)}, {{}, {}});
    return tensor::reduce_from_tp(project(at::silu(gate_up[0]) * gate_up[1], weight_of(*m.down_proj, m.down_proj->weight)),
                                  tp);
  }
  const PackedLayer& p = layers_[layer];
  at::Tensor gate_up = p.gate_up.forward(xc, gate_up_out_);  // [..., 2·I]
  auto shape = gate_up.sizes().vec();
  shape.back() = intermediate_;
  at::Tensor act = act_out_.take(gate_up.numel() / gate_up.size(-1), intermediate_).view(shape);
  at::silu_out(act, gate_up.narrow(-1, 0, intermediate_));
  act.mul_(gate_up.narrow(-1, intermediate_, intermediate_));
  return tensor::reduce_from_tp(p.down.forward(act, down_out_), tp);
}

at::Tensor SlotProjections::local_logits(const at::Tensor& hidden) {
  return packed() ? head_.forward(hidden, logits_out_) : project(hidden, head_weight(model_));
}

}  // namespace hpcrl::rollout
