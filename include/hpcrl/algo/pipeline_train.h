// A training step's forward and backward for a pipelined role (pp > 1): the
// step's micro-batches go through the role's pipeline schedule
// (parallel/pipeline/executor.h, schedule and virtual stages from
// models.<role>.parallel), the tied embedding's two copies are summed, and the
// gradients are left for Trainer::finish_step (dp sync, clipping, AdamW) —
// exactly as the un-pipelined loops leave them after their last micro-batch.
// Stages plug in only what their last chunk computes from the final hidden
// states; everything else (who holds which layers, the messages, autograd) is
// the same for SFT and the RL updates.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "hpcrl/algo/role.h"
#include "hpcrl/algo/train_step.h"
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

// Per-token log-probs [B, Tl] float32 of ids [B, Tl] (targets: the next
// tokens) through the role's pipeline without gradients, on every pp rank:
// micro-batches of at most `micro_rows` rows (0: one micro-batch). Where the
// schedule needs m % pp == 0 (interleaved) or the rows do not split evenly,
// the batch is padded with copies of its last row, which are dropped again.
at::Tensor pipeline_logprobs(Role& role, const at::Tensor& ids, const at::Tensor& targets, int64_t micro_rows = 0);

// Values only the last pp stage computed (zeros on the others) summed over
// the pp group, so every stage reports the same numbers. No-op at pp = 1.
void share_from_last_stage(const Role& role, at::Tensor& values);

}  // namespace hpcrl::algo
