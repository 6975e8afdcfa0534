// A DecoderModel as pipeline stages: what one model chunk computes on one
// micro-batch, the shape of what passes between chunks, and keeping the tied
// embedding's two copies (first and last stage) in step. These are the pieces
// a trainer plugs into parallel/pipeline's schedules:
//
//   PipelineStep step;
//   step.forward = [&](int i, int chunk, const at::Tensor& input) {
//     auto out = forward_chunk(model, chunk, input, mbs[i]);        // [B, T, C]
//     if (!model.pipeline_layout().is_last_chunk(chunk)) return ChunkOutput{out.hidden, out.aux_loss};
//     return ChunkOutput{{}, my_loss(model, out.hidden, i) + out.aux_loss};
//   };
//   step.activation_buffer = [&](int i) { return activation_buffer(model, mbs[i].ids); };
//   run_pipeline(ctx.pp, step, {schedule, m, v});
//   sync_tied_embedding_grad(model);   // then the dp gradient all-reduce, the optimizer
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/parallel/pipeline/schedule.h"

namespace hpcrl::model {

// One micro-batch as every stage sees it: this sp rank's tokens, [B, Tl].
// All stages need positions and masks for attention; the ids feed the first
// chunk's embedding (later chunks use only their shape).
struct StageBatch {
  at::Tensor ids;             // [B, Tl] int64
  at::Tensor positions;       // [B, Tl] int64, or undefined (consecutive)
  at::Tensor attention_mask;  // [B, Tl], 0 = padding, or undefined (all valid)
};

// Runs model chunk `chunk` (one of model.local_chunks()) on a micro-batch:
// the embedding of mb.ids on chunk 0 (then `input` must be undefined), else
// `input` [B, Tl, C] from the previous chunk; the chunk's layers; the final
// norm on the last chunk. aux_loss: the chunk's share of the MoE aux loss
// (zero for dense models). On a whole model (pp = 1) chunk 0 equals forward().
ForwardOutput forward_chunk(DecoderModel& model, int chunk, const at::Tensor& input, const StageBatch& mb);

// Receive buffer for the hidden states passed between chunks for a
// micro-batch of ids [B, Tl]: uninitialised [B, Tl, C] in the model's dtype
// and on its device.
at::Tensor activation_buffer(const DecoderModel& model, const at::Tensor& ids);

// Forward-only per-token log-probs of a batch through the pipeline (the old /
// reference log-prob pass of RL, `hpcrl score --pp`): rows of `batch` are cut
// into `microbatches` equal micro-batches (B % microbatches == 0), targets
// [B, Tl] are the next tokens. Returns [B, Tl] float32 on every pp rank
// (run_forward_only broadcasts the last stage's results). Works on a whole
// model too (pp = 1: the same passes, no communication).
at::Tensor pipelined_logprobs(DecoderModel& model, const StageBatch& batch, const at::Tensor& targets,
                              int microbatches,
                              parallel::pipeline::Schedule schedule = parallel::pipeline::Schedule::_1f1b);

// Tied embeddings under pp: the first stage (lookup) and the last stage (LM
// head) each hold model.embed_tokens.weight and each gets part of its
// gradient. This exchanges the two and adds them, so both copies carry the
// single-rank gradient and stay equal after the optimizer step. Call once
// per step after the schedule, before the data-parallel all-reduce. No-op
// unless the model is tied, has an LM head, pp > 1 and the embedding trains
// (under LoRA it is frozen: no gradient to sum); collective between pp ranks 0
// and pp - 1 only.
void sync_tied_embedding_grad(DecoderModel& model);
// Whether this rank holds one of those two copies (pp > 1, tied, with an LM head, first or last stage).
bool holds_tied_pipeline_embedding(const DecoderModel& model);
// Whether it holds one and trains it: the two copies' gradients must be summed.
bool trains_tied_pipeline_embedding(const DecoderModel& model);
// The same sum for any tensor that both copies hold alike, e.g. the same
// elements of the gradient's ZeRO-2/3 shard: `t` += the peer stage's `t`, so
// both end up bit-identical (a + b == b + a). Precondition:
// holds_tied_pipeline_embedding(model); collective with the peer stage.
void add_tied_peer(const DecoderModel& model, at::Tensor& t);

// Decoding one token at a time through a pipeline would leave every stage idle
// most of the time, so a pipelined model generates with a whole (pp = 1) copy
// that has its tp/sp/ep layout, device and dtype. make_whole_copy builds the
// copy with no weights; sync_whole_copy loads the pipelined model's current
// weights into it (collective over the pp, tp and ep groups; `what` names the
// weights in errors).
std::shared_ptr<DecoderModel> make_whole_copy(const DecoderModel& pipelined);
void sync_whole_copy(DecoderModel& pipelined, DecoderModel& copy, const std::string& what);

}  // namespace hpcrl::model
