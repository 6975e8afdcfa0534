// Pipeline stages of a DecoderModel (pipeline_stage.h). A chunk is
// DecoderModel::forward() cut at layer boundaries: the masks and RoPE tables
// are recomputed per chunk from the micro-batch (cheap, and nothing but
// hidden states has to cross the wire).
#include "hpcrl/model/pipeline_stage.h"

#include <torch/utils.h>

#include <map>

#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/pipeline/forward_only.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {

namespace {
constexpr int kTiedGradTag = 32767;  // outside the range StageLink uses for step traffic
}

ForwardOutput forward_chunk(DecoderModel& m, int chunk, const at::Tensor& input, const StageBatch& mb) {
  const PipelineLayout& layout = m.pipeline_layout();
  HPCRL_CHECK(m.holds_layer(layout.first_layer(chunk)),
              "chunk " << chunk << " is not on this rank (pp rank " << m.parallel_context().pp_rank() << ", "
                       << layout.describe() << ")");
  HPCRL_CHECK(mb.ids.dim() == 2 && mb.ids.scalar_type() == at::kLong,
              "micro-batch ids must be [B, T] int64, got " << mb.ids.sizes() << " " << mb.ids.scalar_type());
  // ZeRO-3: the outer unit (embedding, final norm, heads) is gathered like
  // forward()'s and stays gathered for the heads and the backward.
  ParameterUnits* units = m.parameter_units();
  at::Tensor h;
  if (chunk == 0) {
    HPCRL_CHECK(!input.defined(), "chunk 0 embeds the ids; it takes no input activation");
    if (units) units->before_forward(ParameterUnits::kOuter);
    h = m.model->embed_tokens->forward(mb.ids);  // [B, Tl, C]
  } else {
    HPCRL_CHECK(input.defined() && input.dim() == 3 && input.size(0) == mb.ids.size(0) &&
                    input.size(1) == mb.ids.size(1) && input.size(2) == m.arch().hidden_size,
                "chunk " << chunk << " input " << (input.defined() ? input.sizes() : at::IntArrayRef{})
                         << " must be [B, T, C] for ids " << mb.ids.sizes() << " and C=" << m.arch().hidden_size);
    h = input;
  }
  LayerInputs in = m.layer_inputs(mb.ids, mb.positions, mb.attention_mask, nullptr, h.scalar_type());
  ForwardOutput out = m.run_layers(h, layout.first_layer(chunk), layout.end_layer(chunk), in);
  if (layout.is_last_chunk(chunk)) {
    if (units) units->before_forward(ParameterUnits::kOuter);
    out.hidden = m.model->norm->forward(out.hidden);
  }
  return out;
}

at::Tensor activation_buffer(const DecoderModel& m, const at::Tensor& ids) {
  const at::Tensor p = m.parameters().front();
  return at::empty({ids.size(0), ids.size(1), m.arch().hidden_size}, p.options().requires_grad(false));
}

at::Tensor pipelined_logprobs(DecoderModel& m, const StageBatch& batch, const at::Tensor& targets, int microbatches,
                              parallel::pipeline::Schedule schedule) {
  const int64_t B = batch.ids.size(0), T = batch.ids.size(1);
  HPCRL_CHECK_INPUT(microbatches >= 1 && B % microbatches == 0,
                    B << " rows do not split into " << microbatches << " equal micro-batches; use a divisor of " << B);
  HPCRL_CHECK(targets.sizes() == batch.ids.sizes(), "targets " << targets.sizes() << " must match ids " << batch.ids.sizes());
  const int64_t rows = B / microbatches;
  auto rows_of = [rows](const at::Tensor& t, int i) { return t.defined() ? t.narrow(0, i * rows, rows) : t; };
  parallel::pipeline::ForwardOnlyStep step;
  step.forward = [&](int i, int chunk, const at::Tensor& input) {
    StageBatch mb{rows_of(batch.ids, i), rows_of(batch.positions, i), rows_of(batch.attention_mask, i)};
    ForwardOutput out = forward_chunk(m, chunk, input, mb);
    if (!m.pipeline_layout().is_last_chunk(chunk)) return out.hidden;
    return m.token_logprobs(out.hidden, rows_of(targets, i), /*with_entropy=*/false).logprobs.to(at::kFloat);
  };
  step.activation_buffer = [&](int i) { return activation_buffer(m, rows_of(batch.ids, i)); };
  const at::TensorOptions result = at::TensorOptions().dtype(at::kFloat).device(m.parameters().front().device());
  step.result_buffer = [&](int) { return at::empty({rows, T}, result); };
  const int v = m.pipeline_layout().virtual_stages;
  const dist::CommPtr pp = m.parallel_context().pp_size() > 1 ? m.parallel_context().pp : nullptr;
  return at::cat(parallel::pipeline::run_forward_only(pp, step, microbatches, schedule, v), 0);
}

bool holds_tied_pipeline_embedding(const DecoderModel& m) {
  const auto& ctx = m.parallel_context();
  if (!m.arch().tie_word_embeddings || !m.options().lm_head || ctx.pp_size() == 1) return false;
  return ctx.pp_rank() == 0 || ctx.pp_rank() == ctx.pp_size() - 1;
}

bool trains_tied_pipeline_embedding(const DecoderModel& m) {
  return holds_tied_pipeline_embedding(m) && m.model->embed_tokens->weight.requires_grad();
}

void add_tied_peer(const DecoderModel& m, at::Tensor& t) {
  const auto& ctx = m.parallel_context();
  HPCRL_CHECK(holds_tied_pipeline_embedding(m), "add_tied_peer on pp rank " << ctx.pp_rank()
                                                << ", which holds no tied embedding");
  const int peer = ctx.pp_rank() == 0 ? ctx.pp_size() - 1 : 0;
  at::Tensor mine = t.contiguous();
  at::Tensor other = at::empty_like(mine);
  auto sent = ctx.pp->send_async(mine, peer, kTiedGradTag);
  ctx.pp->recv_async(other, peer, kTiedGradTag)->wait();
  sent->wait();
  t.add_(other);  // in place, so a gradient that views a flat dp-sync bucket stays one
}

void sync_tied_embedding_grad(DecoderModel& m) {
  if (!trains_tied_pipeline_embedding(m)) return;
  at::Tensor w = m.model->embed_tokens->weight;
  if (!w.grad().defined()) w.mutable_grad() = at::zeros_like(w);
  add_tied_peer(m, w.mutable_grad());
}

std::shared_ptr<DecoderModel> make_whole_copy(const DecoderModel& pipelined) {
  parallel::ParallelContext ctx = pipelined.parallel_context();
  ctx.pp = nullptr;
  ModelOptions o = pipelined.options();
  o.init = false;  // sync_whole_copy fills it
  o.activation_checkpointing = false;
  o.pp_layers.clear();
  o.pp_virtual_stages = 1;
  auto copy = std::make_shared<DecoderModel>(pipelined.arch(), ctx, o);
  const at::Tensor p = pipelined.parameters().front();
  copy->to(p.device(), p.scalar_type());
  return copy;
}

void sync_whole_copy(DecoderModel& pipelined, DecoderModel& copy, const std::string& what) {
  io::NamedTensors full = gather_full_weights(pipelined);
  std::map<std::string, at::Tensor> weights(full.begin(), full.end());
  load_weights(copy, weights, what);
  copy.eval();
}

}  // namespace hpcrl::model
