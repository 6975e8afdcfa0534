// A training step's forward and backward over one rank's micro-batches, the
// same call for SFT, distillation, the GRPO/PPO actor and the PPO critic:
// micro-batches in, a loss per micro-batch from its final hidden states, the
// step's gradient accumulated in the role's parameters out. With pp > 1 the
// micro-batches run through the role's pipeline schedule
// (pipeline_forward_backward); otherwise one forward and backward each, the dp
// gradient sync of the last one overlapping its backward. Either way the
// gradients are left for Trainer::finish_step (sync, clipping, update).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/algo/training/train_step.h"

namespace hpcrl::algo {

// The loss of micro-batch `i` from its final hidden states [R, L/sp, C] (after
// the final norm), scaled so that the sum over the step's micro-batches (and,
// through the gradient average, over the dp·sp group) is the step's loss.
using MicroBatchLoss = std::function<at::Tensor(size_t i, const at::Tensor& hidden)>;

// The MoE load-balancing loss of a step. forward() returns it as a mean over a
// micro-batch's tokens; a stage whose objective is a likelihood (SFT,
// distillation) adds it weighted by each micro-batch's share of the rank's
// `rank_rows` rows, so that a step adds it once whatever its micro-batching.
// The RL updates (actor and critic) optimise their objective alone and pass no
// weights. Returns one weight per micro-batch of `plan`.
std::vector<double> aux_loss_weights_by_rows(const std::vector<MicroBatch>& plan, int64_t rank_rows);

// Forward and backward of every micro-batch `shards` (this sp rank's share of
// each, in order) with `loss`, plus aux_weight[i] × micro-batch i's MoE aux loss
// where aux_weight is not empty (aux_loss_weights_by_rows). No micro-batches is
// a step that contributes no gradient (this rank still joins the dp sync).
// Collective over the role's pp group at pp > 1; the dp sync is
// trainer.finish_step's, after this returns.
void forward_backward(Role& role, Trainer& trainer, const std::vector<TokenBatch>& shards,
                      const MicroBatchLoss& loss, const std::vector<double>& aux_weight = {});

}  // namespace hpcrl::algo
