// Inference forward against the slot cache (slot_forward.h). The layer body
// below is DecoderLayer::forward + Attention::forward + Mlp::forward with
// sp = 1; what differs is where keys and values come from (KvStore: the prompt
// itself during prefill, then copied into the slots; the slot buffers during
// decode) and that one-token products use a GEMV (project() below).
#include "hpcrl/rollout/slot_forward.h"

#include <torch/torch.h>

#include <algorithm>

#include "hpcrl/model/attention.h"
#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/model/decoder_layer.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {
namespace tensor = parallel::tensor;

// x·Wᵀ + b, as at::linear. A single token on the CPU goes through at::mv:
// LibTorch's CPU linear runs a one-row GEMM at about half the memory bandwidth
// of a GEMV (measured with OpenBLAS: 11.6 vs 24.3 GB/s on 2 threads), and a
// batch-1 decode step is nothing but these products.
at::Tensor project(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
  if (x.numel() != x.size(-1) || !x.device().is_cpu()) return at::linear(x, w, b);
  auto shape = x.sizes().vec();
  shape.back() = w.size(0);
  at::Tensor y = at::mv(w, x.reshape({-1}));
  if (b.defined()) y = y + b;
  return y.view(shape);
}
at::Tensor column(const tensor::ColumnParallelLinear& l, const at::Tensor& xc) { return project(xc, l.weight, l.bias); }
at::Tensor row(const tensor::RowParallelLinear& l, const at::Tensor& x, const dist::CommPtr& tp) {
  at::Tensor y = tensor::reduce_from_tp(project(x, l.weight), tp);
  return l.bias.defined() ? y + l.bias : y;
}
}  // namespace

SlotForward::SlotForward(model::DecoderModel& model)
    : model_(model), rope_(model.arch()), device_(model.model->embed_tokens->weight.device()) {
  HPCRL_CHECK(model.options().lm_head, "generation needs a model with an LM head (this one was built with "
                                       "options.lm_head = false, e.g. a critic)");
  const auto layout = model::attention_layout(model.arch(), model.parallel_context().tp_size(), 1);
  heads_ = layout.heads;
  kv_heads_ = layout.kv_heads;
}

at::Tensor SlotForward::run_layers(at::Tensor x, const at::Tensor& positions, const at::Tensor& allowed,
                                   const at::Tensor& token_mask, const KvStore& store) {
  const int64_t N = x.size(0), T = x.size(1), D = model_.arch().head_dim;
  const auto& tp = model_.parallel_context().tp;
  model::RopeTables rope = rope_.tables(positions, x.scalar_type());
  auto& layers = model_.model->layers;
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<model::DecoderLayer>(i);
    auto& attn = *layer->self_attn;
    at::Tensor xc = parallel::tensor::copy_to_tp(layer->input_layernorm->forward(x), tp);
    at::Tensor q = column(*attn.q_proj, xc).view({N, T, heads_, D});
    at::Tensor k = column(*attn.k_proj, xc).view({N, T, kv_heads_, D});
    at::Tensor v = column(*attn.v_proj, xc).view({N, T, kv_heads_, D});
    if (attn.q_norm) {
      q = attn.q_norm->forward(q);
      k = attn.k_norm->forward(k);
    }
    q = model::apply_rotary(q, rope).transpose(1, 2);  // [N, h, T, D]
    k = model::apply_rotary(k, rope).transpose(1, 2);  // [N, hkv, T, D]
    v = v.transpose(1, 2);
    auto [keys, values] = store(static_cast<int64_t>(i), k, v);
    at::Tensor o = model::attend(q, keys, values, allowed).transpose(1, 2).reshape({N, T, heads_ * D});
    at::Tensor h = x + row(*attn.o_proj, o, tp);
    at::Tensor n = layer->post_attention_layernorm->forward(h);
    if (layer->mlp) {  // Mlp::forward: down(silu(gate(x)) · up(x))
      const auto& mlp = *layer->mlp;
      at::Tensor nc = parallel::tensor::copy_to_tp(n, tp);
      x = h + row(*mlp.down_proj, at::silu(column(*mlp.gate_proj, nc)) * column(*mlp.up_proj, nc), tp);
    } else {
      x = h + layer->moe->forward(n, token_mask).y;
    }
  }
  return model_.model->norm->forward(x);
}

at::Tensor SlotForward::full_logits(const at::Tensor& hidden) {
  // DecoderModel::local_logits: the LM head, or the (vocab-parallel) embedding when tied.
  const auto& tp = model_.parallel_context().tp;
  const at::Tensor& w = model_.lm_head ? model_.lm_head->weight : model_.model->embed_tokens->weight;
  at::Tensor local = project(parallel::tensor::copy_to_tp(hidden, tp), w);  // [N, V/tp]
  if (tp && tp->size() > 1) local = tp->all_gather(local.contiguous(), 1);
  return local.to(at::promote_types(local.scalar_type(), at::kFloat));  // float64 models keep their precision
}

at::Tensor SlotForward::prefill(KvSlots& slots, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                                const std::vector<int64_t>& prompt_of) {
  torch::NoGradGuard no_grad;
  const int64_t U = static_cast<int64_t>(prompts.size()), F = static_cast<int64_t>(prompt_of.size());
  int64_t L = 0;
  for (const auto* p : prompts) L = std::max<int64_t>(L, static_cast<int64_t>(p->size()));
  HPCRL_CHECK(first >= 0 && first + F <= slots.slots(), "prefill of " << F << " sequences at slot " << first
                                                                       << " overflows " << slots.slots() << " slots");
  HPCRL_CHECK(L <= slots.capacity(), "a " << L << "-token prompt does not fit the " << slots.capacity()
                                          << "-token KV slots");
  // Right-padded: real tokens sit at their positions, so causal attention never
  // lets a real query see padding and each row's cache columns are its positions.
  at::Tensor ids = at::zeros({U, L}, at::kLong), valid = at::zeros({U, L}, at::kBool);
  std::vector<int64_t> last(U);
  {
    auto ida = ids.accessor<int64_t, 2>();
    auto va = valid.accessor<bool, 2>();
    for (int64_t u = 0; u < U; ++u) {
      const auto& p = *prompts[u];
      for (size_t t = 0; t < p.size(); ++t) {
        ida[u][t] = p[t];
        va[u][t] = true;
      }
      last[u] = static_cast<int64_t>(p.size()) - 1;
    }
  }
  ids = ids.to(device_);
  valid = valid.to(device_);
  at::Tensor positions = at::arange(L, ids.options()).unsqueeze(0).expand({U, L});
  at::Tensor allowed = model::attention_mask(valid, L, L);  // [U, 1, L, L]
  at::Tensor rows = at::tensor(prompt_of, at::kLong).to(device_);
  auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {
    slots.k(layer).narrow(0, first, F).narrow(2, 0, L).copy_(k.index_select(0, rows));
    slots.v(layer).narrow(0, first, F).narrow(2, 0, L).copy_(v.index_select(0, rows));
    return std::make_pair(k, v);
  };
  at::Tensor h = run_layers(model_.model->embed_tokens->forward(ids), positions, allowed, valid, store);  // [U, L, C]
  at::Tensor idx = at::tensor(last, at::kLong).to(device_).view({U, 1, 1}).expand({U, 1, h.size(2)});
  at::Tensor logits = full_logits(h.gather(1, idx).squeeze(1));  // [U, V]
  for (int64_t f = 0; f < F; ++f) slots.set_length(first + f, last[prompt_of[f]] + 1);
  return logits.index_select(0, rows);
}

at::Tensor SlotForward::decode(KvSlots& slots, int64_t rows, const std::vector<int64_t>& tokens) {
  torch::NoGradGuard no_grad;
  HPCRL_CHECK(rows >= 1 && rows <= slots.slots() && static_cast<int64_t>(tokens.size()) == rows,
              "decode of " << tokens.size() << " tokens for " << rows << " of " << slots.slots() << " slots");
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r) longest = std::max(longest, slots.length(r));
  const int64_t Tk = longest + 1, D = model_.arch().head_dim;
  HPCRL_CHECK(Tk <= slots.capacity(), "decoding past the " << slots.capacity() << "-token KV slots");
  at::Tensor len = slots.lengths(rows);                                                    // [R]
  at::Tensor ids = at::tensor(tokens, at::kLong).to(device_).view({rows, 1});              // [R, 1]
  at::Tensor allowed = (at::arange(Tk, len.options()).unsqueeze(0) <= len.unsqueeze(1))  // [R, 1, 1, Tk]
                           .view({rows, 1, 1, Tk});
  at::Tensor column = len.view({rows, 1, 1, 1}).expand({rows, kv_heads_, 1, D});
  auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {
    at::Tensor kc = slots.k(layer).narrow(0, 0, rows), vc = slots.v(layer).narrow(0, 0, rows);
    kc.scatter_(2, column, k);
    vc.scatter_(2, column, v);
    return std::make_pair(kc.narrow(2, 0, Tk), vc.narrow(2, 0, Tk));
  };
  at::Tensor h = run_layers(model_.model->embed_tokens->forward(ids), len.view({rows, 1}), allowed, {}, store);
  for (int64_t r = 0; r < rows; ++r) slots.set_length(r, slots.length(r) + 1);
  return full_logits(h.select(1, 0));
}

void SlotForward::idle_step() {
  torch::NoGradGuard no_grad;
  at::Tensor ids = at::zeros({1, 1}, at::TensorOptions().dtype(at::kLong).device(device_));
  auto store = [](int64_t, at::Tensor k, at::Tensor v) { return std::make_pair(k, v); };
  run_layers(model_.model->embed_tokens->forward(ids), ids, {}, {}, store);
}

}  // namespace hpcrl::rollout
