// A training step's forward and backward for a pipelined role (pp > 1), which
// forward_backward (algo/training/forward_backward.h) runs for every stage: the step's
// micro-batches go through the role's pipeline schedule
// (parallel/pipeline/executor.h, schedule and virtual stages from
// models.<role>.parallel), the tied embedding's two copies are summed, and the
// gradients are left for Trainer::finish_step (dp sync, clipping, AdamW) —
// exactly as the un-pipelined path leaves them after its last micro-batch.
// Stages plug in only what their last chunk computes from the final hidden
// states; everything else (who holds which layers, the messages, autograd) is
// the same for SFT and the RL updates.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/parallel/pipeline/executor.h"

namespace hpcrl::algo {

// The loss of micro-batch `microbatch` from its final hidden states [B, Tl, C]
// (after the final norm), scaled like the un-pipelined path's per-micro-batch
// loss so that the sum over micro-batches is the step's loss.
using LastStageLoss = std::function<at::Tensor(int microbatch, const at::Tensor& hidden)>;

// The schedule of models.<role>.parallel.pp_schedule.
parallel::pipeline::Schedule pipeline_schedule(const Role& role);

// Runs the step's micro-batches `mbs` through the pipeline with gradients:
// `loss` on the last chunk; each chunk's MoE aux-loss share weighted by
// aux_weight[i] (as the un-pipelined loop weights forward()'s aux loss).
// Collective over the role's pp group; the dp gradient sync happens in
// trainer.finish_step(), once, after this returns.
parallel::pipeline::PipelineStats pipeline_forward_backward(Role& role, Trainer& trainer,
                                                            const std::vector<model::StageBatch>& mbs,
                                                            const LastStageLoss& loss,
                                                            const std::vector<double>& aux_weight);

// What the last chunk computes in a forward-only pass from a micro-batch's
// final hidden states [b, Tl, C] (after the final norm): `rows` [b] int64 are
// the micro-batch's rows of the caller's batch (padding rows repeat the last
// row), for selecting the per-row inputs of the head (targets, ids, ...).
using LastStageOutput = std::function<at::Tensor(const at::Tensor& hidden, const at::Tensor& rows)>;

// A forward-only pass of ids [B, Tl] through the role's pipeline (no grad,
// run_forward_only on the role's schedule): micro-batches of at most
// `micro_rows` rows (0: one micro-batch), `head` on the last chunk returning
// [b, row_shape...] of `dtype`. Returns [B, row_shape...] on every pp rank
// (the last stage's results are broadcast over pp). Where the schedule needs
// m % pp == 0 (interleaved) or the rows do not split evenly, the batch is
// padded with copies of its last row, whose results are dropped again.
// Collective over the role's pp group (and whatever `head` is collective over).
at::Tensor pipeline_forward_only(Role& role, const at::Tensor& ids, int64_t micro_rows, const LastStageOutput& head,
                                 at::IntArrayRef row_shape, at::ScalarType dtype);

// Per-token log-probs [B, Tl] float32 of ids [B, Tl] (targets: the next
// tokens) through the role's pipeline without gradients, on every pp rank
// (pipeline_forward_only with the LM head).
// temperature: of softmax(logits / temperature), as forward_logprobs.
at::Tensor pipeline_logprobs(Role& role, const at::Tensor& ids, const at::Tensor& targets, int64_t micro_rows = 0,
                             double temperature = 1.0);

// `runner` runs passes on the rows `owner`'s data-parallel split gives each
// rank (PPO's critic and reference on the policy's experience, distillation's
// teacher on the student's batch). The ranks of one replica of `runner` (one
// of its dp ranks: its tp, sp and pp groups) exchange activations, so they
// must hold the same rows, i.e. the same dp rank of `owner`. Roles with the
// same dp size but a different pp break this unless dp = 1 (pp is the
// outermost mesh dimension). Collective over `world`: InputError on every
// rank naming `where`, the ranks, and the fix.
void check_same_rows(const dist::CommPtr& world, const Role& owner, const Role& runner, const std::string& where);

// Values only the last pp stage computed (zeros on the others) summed over
// the pp group, so every stage reports the same numbers. No-op at pp = 1.
void share_from_last_stage(const Role& role, at::Tensor& values);

}  // namespace hpcrl::algo
