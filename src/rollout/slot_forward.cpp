// Inference forward against the slot cache (slot_forward.h). The layer body
// below is DecoderLayer::forward + Attention::forward + Mlp::forward with
// sp = 1; what differs is where keys and values come from (KvStore: the prompt
// itself during prefill, then copied into the slots; the slot buffers during
// decode) and that the linear layers are SlotProjections (packed CPU weights
// for a float32 model on the CPU, the model's own weights otherwise).
#include "hpcrl/rollout/slot_forward.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/model/attention.h"
#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/model/decoder_layer.h"
#include "hpcrl/model/rms_norm.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

SlotForward::SlotForward(model::DecoderModel& model, int64_t attention_elements, SlotProjections& projections)
    : model_(model),
      rope_(model.arch(), model.model->embed_tokens->weight.device()),
      attention_elements_(attention_elements),
      device_(model.model->embed_tokens->weight.device()),
      proj_(projections) {
  HPCRL_CHECK(model.options().lm_head, "generation needs a model with an LM head (this one was built with "
                                       "options.lm_head = false, e.g. a critic)");
  const auto layout = model::attention_layout(model.arch(), model.parallel_context().tp_size(), 1);
  heads_ = layout.heads;
  kv_heads_ = layout.kv_heads;
  const at::Tensor& w = model.model->embed_tokens->weight;
  cpu_decode_ = w.device().is_cpu() && w.scalar_type() == at::kFloat && model.arch().num_experts == 0;
}

at::Tensor SlotForward::run_layers(at::Tensor x, const at::Tensor& positions, const at::Tensor& allowed,
                                   const at::Tensor& token_mask, const KvStore& store) {
  const int64_t N = x.size(0), T = x.size(1), D = model_.arch().head_dim;
  const auto& tp = model_.parallel_context().tp;
  const double eps = model_.arch().rms_norm_eps;
  using Norm = SlotProjections::Norm;
  model::RopeTables rope = rope_.tables(positions, x.scalar_type());
  auto& layers = model_.model->layers;
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<model::DecoderLayer>(i);
    at::Tensor xc = parallel::tensor::copy_to_tp(model::rms_norm(x, proj_.norm_weight(i, Norm::input), eps), tp);
    auto [q, k, v] = proj_.qkv(int64_t(i), xc);
    q = q.view({N, T, heads_, D});
    k = k.view({N, T, kv_heads_, D});
    v = v.view({N, T, kv_heads_, D});
    if (const at::Tensor& q_norm = proj_.norm_weight(i, Norm::q); q_norm.defined()) {
      q = model::rms_norm(q, q_norm, eps);
      k = model::rms_norm(k, proj_.norm_weight(i, Norm::k), eps);
    }
    q = model::apply_rotary(q, rope).transpose(1, 2);  // [N, h, T, D]
    k = model::apply_rotary(k, rope).transpose(1, 2);  // [N, hkv, T, D]
    v = v.transpose(1, 2);
    auto [keys, values] = store(static_cast<int64_t>(i), k, v);
    at::Tensor o = model::attend(q, keys, values, allowed).transpose(1, 2).reshape({N, T, heads_ * D});
    at::Tensor h = x + proj_.attention_output(int64_t(i), o);
    at::Tensor n = model::rms_norm(h, proj_.norm_weight(i, Norm::post_attention), eps);
    if (layer->mlp)  // Mlp::forward: down(silu(gate(x)) · up(x))
      x = h + proj_.mlp(int64_t(i), parallel::tensor::copy_to_tp(n, tp));
    else
      x = h + layer->moe->forward(n, token_mask).y;
  }
  return model_.model->norm->forward(x);
}

at::Tensor SlotForward::full_logits(const at::Tensor& hidden) {
  const auto& tp = model_.parallel_context().tp;
  at::Tensor local = proj_.local_logits(parallel::tensor::copy_to_tp(hidden, tp));  // [N, V/tp]
  local = dist::all_gather(tp, local, 1);
  return local.to(at::promote_types(local.scalar_type(), at::kFloat));  // float64 models keep their precision
}

namespace {
// A prefill chunk's hidden states h [U, T, C] from position c0: each prompt
// whose last token (last_at [U]) falls in the chunk takes its state there into
// `kept` ([U, C], undefined before the first chunk); the others keep theirs.
// A fixed number of operations, however many prompts.
at::Tensor take_last_hidden(const at::Tensor& h, const at::Tensor& last_at, int64_t c0, const at::Tensor& kept) {
  const int64_t U = h.size(0), T = h.size(1);
  const at::Tensor in_chunk = (last_at - c0).clamp(0, T - 1);  // a prompt ending elsewhere reads a dropped row
  const at::Tensor here = h.gather(1, in_chunk.view({U, 1, 1}).expand({U, 1, h.size(2)})).squeeze(1);
  if (!kept.defined()) return here;  // a prompt ending in a later chunk takes its state there
  const at::Tensor ends_here = (last_at >= c0).logical_and(last_at < c0 + T).unsqueeze(1);
  return at::where(ends_here, here, kept);
}
}  // namespace

int64_t SlotForward::prefill_chunk(int64_t prompts, int64_t longest) const {
  const int64_t by_scores = attention_elements_ / std::max<int64_t>(1, prompts * heads_ * longest);
  return std::min({by_scores, kPrefillTokens / std::max<int64_t>(1, prompts), longest});
}

at::Tensor SlotForward::prefill(KvSlots& slots, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                                const std::vector<int64_t>& prompt_of, int64_t chunk) {
  torch::NoGradGuard no_grad;
  const int64_t U = static_cast<int64_t>(prompts.size()), F = static_cast<int64_t>(prompt_of.size());
  int64_t L = 0;
  for (const auto* p : prompts) L = std::max<int64_t>(L, static_cast<int64_t>(p->size()));
  HPCRL_CHECK(first >= 0 && first + F <= slots.slots(), "prefill of " << F << " sequences at slot " << first
                                                                       << " overflows " << slots.slots() << " slots");
  HPCRL_CHECK(L <= slots.capacity(), "a " << L << "-token prompt does not fit the " << slots.capacity()
                                          << "-token KV slots");
  HPCRL_CHECK(chunk >= 1 && U <= F, "prefill of " << U << " prompts for " << F << " sequences in chunks of " << chunk);
  for (int64_t u = 0; u < U; ++u)
    HPCRL_CHECK(prompt_of[u] == u, "prefill wants the first sequence of each prompt first, in prompt order");
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
  const at::Tensor last_at = at::tensor(last, at::kLong).to(device_);  // [U]
  at::Tensor last_hidden;  // [U, C]: each prompt's hidden state at its last token
  for (int64_t c0 = 0; c0 < L; c0 += chunk) {
    const int64_t T = std::min(chunk, L - c0), c1 = c0 + T;
    at::Tensor positions = at::arange(c0, c1, ids.options()).unsqueeze(0).expand({U, T});
    at::Tensor allowed = model::attention_mask(valid.narrow(1, 0, c1), T, c1);  // [U, 1, T, c1]
    // This chunk's keys/values go into the prompts' own slots, and the chunk
    // attends to all of that slot's columns so far.
    auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {
      at::Tensor ks = slots.k(layer).narrow(0, first, U), vs = slots.v(layer).narrow(0, first, U);
      ks.narrow(2, c0, T).copy_(k);
      vs.narrow(2, c0, T).copy_(v);
      return std::make_pair(ks.narrow(2, 0, c1), vs.narrow(2, 0, c1));
    };
    at::Tensor h = run_layers(model_.model->embed_tokens->forward(ids.narrow(1, c0, T)), positions, allowed,
                              valid.narrow(1, c0, T), store);  // [U, T, C]
    last_hidden = take_last_hidden(h, last_at, c0, last_hidden);
  }
  for (int64_t u = 0; u < U; ++u) slots.set_length(first + u, last[u] + 1);
  std::vector<int64_t> from, to;  // the other samples of a prompt copy its slot, all in one move
  for (int64_t f = U; f < F; ++f) {
    from.push_back(first + prompt_of[f]);
    to.push_back(first + f);
  }
  slots.move(from, to);
  at::Tensor logits = full_logits(last_hidden);  // [U, V]
  return logits.index_select(0, at::tensor(prompt_of, at::kLong).to(device_));
}

at::Tensor SlotForward::prefill_fixed(KvSlots& slots, const at::Tensor& ids, const at::Tensor& lengths,
                                      const at::Tensor& sample_prompt, const at::Tensor& sample_slot) {
  torch::NoGradGuard no_grad;
  const int64_t U = ids.size(0), L = ids.size(1);
  HPCRL_CHECK(U >= 1 && L <= slots.capacity() && U * L <= kPrefillTokens && lengths.numel() == U &&
                  sample_prompt.numel() == sample_slot.numel() && sample_slot.numel() <= slots.slots(),
              "a fixed prefill of " << U << " x " << L << " prompt tokens for " << sample_slot.numel()
                                    << " sequences over " << slots.slots() << " x " << slots.capacity() << " slots");
  const at::Tensor positions = at::arange(L, ids.options()).unsqueeze(0).expand({U, L});
  const at::Tensor valid = positions < lengths.unsqueeze(1);  // [U, L]
  const at::Tensor allowed = model::attention_mask(valid, L, L);
  // Every sequence's slot takes its prompt's keys/values, padding columns included (past its length: no row
  // reads them); the prompts attend to their own.
  auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {
    slots.k(layer).narrow(2, 0, L).index_copy_(0, sample_slot, k.index_select(0, sample_prompt));
    slots.v(layer).narrow(2, 0, L).index_copy_(0, sample_slot, v.index_select(0, sample_prompt));
    return std::make_pair(k, v);
  };
  const at::Tensor h = run_layers(model_.model->embed_tokens->forward(ids), positions, allowed, valid, store);
  const at::Tensor last_at = lengths - 1;
  return full_logits(take_last_hidden(h, last_at, 0, {})).index_select(0, sample_prompt);
}

at::Tensor SlotForward::extend(KvSlots& slots, int64_t first, const std::vector<std::vector<int32_t>>& tokens) {
  torch::NoGradGuard no_grad;
  const int64_t J = int64_t(tokens.size());
  std::vector<int64_t> start(J), count(J);
  int64_t T = 0, keys = 0;  // the longest list, and the most columns any row attends to
  for (int64_t j = 0; j < J; ++j) {
    start[j] = slots.length(first + j);
    count[j] = int64_t(tokens[j].size());
    HPCRL_CHECK(count[j] >= 1, "extending slot " << first + j << " by no token");
    T = std::max(T, count[j]);
    keys = std::max(keys, start[j] + count[j]);
  }
  HPCRL_CHECK(J >= 1 && first + J <= slots.slots() && keys <= slots.capacity() && J * T <= kPrefillTokens,
              "extending " << J << " slots from " << first << " by up to " << T << " tokens past the "
                           << slots.capacity() << "-token KV slots or the " << kPrefillTokens << "-token prefill");
  at::Tensor ids = at::zeros({J, T}, at::kLong), valid = at::zeros({J, T}, at::kBool);
  {
    auto ida = ids.accessor<int64_t, 2>();
    auto va = valid.accessor<bool, 2>();
    for (int64_t j = 0; j < J; ++j)
      for (int64_t t = 0; t < count[j]; ++t) ida[j][t] = tokens[size_t(j)][size_t(t)], va[j][t] = true;
  }
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device_);
  const at::Tensor offset = at::tensor(start, at::kLong).to(device_).unsqueeze(1);  // [J, 1]
  const at::Tensor positions = offset + at::arange(T, longs).unsqueeze(0);          // [J, T]
  // Query t of row j (at position start_j + t) sees its row's columns up to its position; padded
  // queries see the same and are never read.
  const at::Tensor allowed = (at::arange(keys, longs).view({1, 1, keys}) <= positions.unsqueeze(2)).unsqueeze(1);
  // Row j's token t goes to column start_j + t. A padded token (t >= count_j) repeats the row's last one, into
  // its column: every row is written by one scatter per buffer, and no column past the row's tokens.
  // Both as indices along the columns of a layer's [J, Hkv, T, D] keys and values, made once for every layer.
  const at::Tensor count_at = at::tensor(count, at::kLong).to(device_).unsqueeze(1);       // [J, 1]
  const at::Tensor source = at::minimum(at::arange(T, longs).unsqueeze(0), count_at - 1);  // [J, T]
  const std::vector<int64_t> per_layer = {J, kv_heads_, T, model_.arch().head_dim};
  const at::Tensor column = (offset + source).view({J, 1, T, 1}).expand(per_layer);
  const at::Tensor taken = source.view({J, 1, T, 1}).expand(per_layer);
  auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {  // k, v: [J, Hkv, T, D]
    at::Tensor ks = slots.k(layer).narrow(0, first, J), vs = slots.v(layer).narrow(0, first, J);
    ks.scatter_(2, column, k.gather(2, taken));
    vs.scatter_(2, column, v.gather(2, taken));
    return std::make_pair(ks.narrow(2, 0, keys), vs.narrow(2, 0, keys));
  };
  at::Tensor h = run_layers(model_.model->embed_tokens->forward(ids.to(device_)), positions, allowed,
                            valid.to(device_), store);  // [J, T, C]
  std::vector<int64_t> last(J);
  for (int64_t j = 0; j < J; ++j) {
    slots.set_length(first + j, start[j] + count[j]);
    last[j] = count[j] - 1;
  }
  const at::Tensor at_last = at::tensor(last, at::kLong).to(device_).view({J, 1, 1}).expand({J, 1, h.size(2)});
  return full_logits(h.gather(1, at_last).squeeze(1));  // [J, V]
}

at::Tensor SlotForward::decode_layers(KvSlots& slots, int64_t B, int64_t keys, const at::Tensor& tokens,
                                      const at::Tensor& positions, const at::Tensor& columns) {
  const int64_t D = model_.arch().head_dim;
  // [B, 1, 1, keys]: row r attends to columns up to its position.
  const at::Tensor columns_so_far = at::arange(keys, positions.options()).unsqueeze(0);
  const at::Tensor allowed = (columns_so_far <= positions.unsqueeze(1)).view({B, 1, 1, keys});
  at::Tensor column = columns.view({B, 1, 1, 1}).expand({B, kv_heads_, 1, D});
  auto store = [&](int64_t layer, at::Tensor k, at::Tensor v) {
    at::Tensor kc = slots.k(layer).narrow(0, 0, B), vc = slots.v(layer).narrow(0, 0, B);
    kc.scatter_(2, column, k);
    vc.scatter_(2, column, v);
    return std::make_pair(kc.narrow(2, 0, keys), vc.narrow(2, 0, keys));
  };
  at::Tensor x = model_.model->embed_tokens->forward(tokens.view({B, 1}));  // [B, 1, C]
  return run_layers(x, positions.view({B, 1}), allowed, {}, store).select(1, 0);
}

at::Tensor SlotForward::decode(KvSlots& slots, int64_t rows, const at::Tensor& tokens, const at::Tensor& positions) {
  torch::NoGradGuard no_grad;
  HPCRL_CHECK(rows >= 1 && rows <= slots.slots() && tokens.numel() == rows && positions.numel() == rows,
              "decode of " << tokens.numel() << " tokens for " << rows << " of " << slots.slots() << " slots");
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r) longest = std::max(longest, slots.length(r));
  const int64_t Tk = longest + 1;
  HPCRL_CHECK(Tk <= slots.capacity(), "decoding past the " << slots.capacity() << "-token KV slots");
  at::Tensor h;
  if (cpu_decode_) {
    at::Tensor x = model_.model->embed_tokens->forward(tokens.view({rows, 1}));  // [R, 1, C]
    h = decode_layers_cpu(x.view({rows, -1}), slots, rope_.tables(positions.view({rows, 1}), x.scalar_type()));
  } else {
    h = decode_layers(slots, rows, Tk, tokens, positions, positions);
  }
  for (int64_t r = 0; r < rows; ++r) slots.set_length(r, slots.length(r) + 1);
  return full_logits(h);
}

at::Tensor SlotForward::decode_fixed(KvSlots& slots, int64_t B, int64_t keys, const at::Tensor& tokens,
                                     const at::Tensor& positions, const at::Tensor& columns) {
  torch::NoGradGuard no_grad;
  HPCRL_CHECK(B >= 1 && B <= slots.slots() && keys <= slots.capacity() && tokens.numel() == B &&
                  positions.numel() == B && columns.numel() == B,
              "a fixed decode step of " << B << " rows and " << keys << " keys over " << slots.slots() << " x "
                                        << slots.capacity() << " slots");
  return full_logits(decode_layers(slots, B, keys, tokens, positions, columns));
}

void SlotForward::idle_step() {
  torch::NoGradGuard no_grad;
  at::Tensor ids = at::zeros({1, 1}, at::TensorOptions().dtype(at::kLong).device(device_));
  auto store = [](int64_t, at::Tensor k, at::Tensor v) { return std::make_pair(k, v); };
  run_layers(model_.model->embed_tokens->forward(ids), ids, {}, {}, store);
}

}  // namespace hpcrl::rollout
